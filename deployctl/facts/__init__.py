"""Reference facts about SGLang shipped as data (flag interactions, ServerArgs fields per version)."""
