class Backend:
    FULL = "full"
    BREAKABLE = "breakable"
    DISABLED = "disabled"
    ALL = (FULL, BREAKABLE, DISABLED)
