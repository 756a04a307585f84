"""The server's command groups for `factbank`: `up`, `migrate`, `serve` (server.py) and
`admin` (admin.py), registered through the `factbank.commands` entry points.

They need the server extra. In a light client install this package's import raises
MissingExtra (the modules are looked up, not imported), so `factbank` leaves both groups
out and says which extra brings them.
"""

from factbank_common.commands import require

require("server", "asyncpg", "litestar", "uvicorn", "numpy")
