"""The MCP adapters: one thin server per domain (arguments in, a call to the domain's service, a typed
result out), the project's tools, the built-in server registrations and what every adapter shares."""
