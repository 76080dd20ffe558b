"""The weekly flake digest of an organisation (an installation): its figures are computed in
``bot.core.digest`` and written in ``bot.render.digest``; here they are gathered from the store, scoped by
installation, for ``flaketally digest``."""
