"""The inventory: the YAML file operators edit, parsed with line numbers (``marked_yaml``), validated into typed
deployments, profiles and policies (``model``, ``schema``, ``policy``, ``checks``), every problem reported at
once (``problems``). Used by every verb and flow."""
