"""The promote runner: ``runner`` does each action of the state machine (``deployctl.decisions.machine``)
through the small protocols of ``protocols``, bound to the real world in ``bindings``; the steps before and
after the verdict (``baseline_steps``, ``verify_steps``, sharing ``step_context``) and the output gate's live
side (``output_gate``). Used by promote, bisect (a trial is a promote), rollback and recover."""
