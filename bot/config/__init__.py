"""A repository's ``.github/flaketally.yml`` over its organisation's: the schema (``schema``) and how the
files become the configuration in force (``load``). Fetching them from GitHub is the pipeline's
(``bot.pipeline.config``)."""
