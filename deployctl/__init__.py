"""deployctl: promote SGLang server configurations under systemd, with evidence and automatic rollback."""

__version__ = "0.1.0"
