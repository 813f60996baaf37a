"""Light modules that the stdio relay's path and the suite share, with no MCP library or store layer behind them: the
built-in server registrations (:mod:`.builtin`) and the owner's wire conventions (:mod:`.proxying`)."""
