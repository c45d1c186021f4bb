TOOL_CALL_PARSER_NAMES = ["glm47", "qwen"]
