from typing import Dict


class ReasoningParser:
    DetectorMap: Dict[str, type] = {
        "glm45": object,
        "qwen3": object,
    }
