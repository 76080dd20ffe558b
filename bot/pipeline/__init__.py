"""The pipeline the workers run for each webhook event, one module per step in the order they run:

- ``attempt``: the entry points (``process_workflow_run``, ``rejudge``, ``act``) and ``answer``, which
  publishes within the installation's write budget (``bot.github.budget``);
- ``scope``: what every step needs (``Scope``, ``Options``);
- ``collect``: artifacts of every attempt of the commit into the store;
- ``assess``: the stored reports of the commit into a ``CommitReport``;
- ``publish``: the check run and the pull request comments, planned (only what a person will read and
  GitHub does not hold yet) and then sent;
- ``port``: every GitHub call a step may make (``Port``).
"""
