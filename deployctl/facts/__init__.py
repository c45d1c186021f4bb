"""Reference facts about SGLang shipped as data (flag interactions, ServerArgs fields per version). Read by
the inventory's checks, pre-flight and the startup diff, so by promote, bisect and ``check``."""
