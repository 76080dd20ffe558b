"""The pipeline the workers run for each webhook event, one module per step in the order they run:

- ``attempt``: the entry points (``process_workflow_run``, ``open_check_run``, ``rejudge``);
- ``scope``: what every step needs (``Scope``, ``Options``);
- ``collect``: artifacts of every attempt of the commit into the store;
- ``assess``: the stored reports of the commit into a ``CommitReport``;
- ``publish``: the check run and the pull request comments;
- ``port``: every GitHub call a step may make (``Port``).
"""
