"""What the client and the server both import, and nothing else does: the wire contract's
constants (`schema`), inert text for terminals and logs (`inert`), and the command kit that
every `factbank` command group uses (`commands`, `output`).

It imports nothing from either side, so the light client (no server extra) and the services
share these words without the server importing client code or the client importing the
server's."""
