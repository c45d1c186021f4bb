"""Pictures of the evidence: a release's records in, one self-contained HTML page (or a markdown table) out.

Pure: no ledger, no files, no clock. ``deployctl report`` / ``bench --html`` read and write; this package
only turns values into strings (charts are matplotlib figures rendered to inline SVG). Used by no flow:
by the ``report``, ``show`` and ``bench --html`` verbs, after the fact.
"""
