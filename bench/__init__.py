"""The LLM-judge bench: scenarios, answers from the real assistant, checks, a judge, reports.

Two phases, so that a CPU box never holds two models at once:

1. ``nuisances bench run`` plays every scenario through the assistant (in-process, or against a
   running server) and records the answers (``bench.runner``, ``bench.records``);
2. ``nuisances bench judge RUN_DIR`` grades them: deterministic checks first (``bench.checks``),
   then a separate judge model under measured budgets (``bench.judge``, ``bench.grader``), with
   an append-only journal (``bench.journal``), statistics (``bench.stats``) and reports
   (``bench.summary``, ``bench.report``, ``bench.html``).

A criterion ends ``PASS``, ``FAIL`` or ``ERROR`` (``timeout``, ``transport``, ``parse``): an
error is never a failing grade, never dropped, and lowers the coverage the gate checks.
"""
