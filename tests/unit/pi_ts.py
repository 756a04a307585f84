"""The Pi extension as `factbank install pi` writes it, imported in node (through jiti) so the
tests can call its functions: shared by the Pi hook, tool and timeline tests."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from factbank_client.install import common
from tests.harness.npm import harness_dir


@functools.cache
def installed_extension() -> Path:
    """The extension as `factbank install pi` writes it, in a temp dir of its own."""
    home = Path(tempfile.mkdtemp(prefix="factbank-pi-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    path = home / common.PI_EXTENSION
    path.write_text(common.pi_extension_text(), "utf-8")
    return path


def _jiti() -> Path:
    jiti = harness_dir() / "node_modules" / "jiti"
    if shutil.which("node") is None or not jiti.is_dir():
        pytest.skip("needs node and the harness install (run tests/harness once)")
    return jiti


def run_ts(body: str) -> object:
    """Import the extension in node via jiti and print json of `body`'s `result`."""
    script = textwrap.dedent(f"""
        const {{ createJiti }} = require({json.dumps(str(_jiti()))});
        const jiti = createJiti(process.cwd() + "/");
        (async () => {{
          const m = await jiti.import({json.dumps(str(installed_extension()))});
          let result;
          {body}
          process.stdout.write(JSON.stringify(result));
        }})().catch((e) => {{ console.error(e); process.exit(1); }});
    """)
    proc = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
