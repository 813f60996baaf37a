"""``python -m aisac_core.projects schema``: print the JSON Schema of ``aisac.toml`` (docs/projects.md publishes it)."""

import json
import sys

from aisac_core.projects.manifest import manifest_json_schema

if sys.argv[1:] == ["schema"]:
    print(json.dumps(manifest_json_schema(), indent=1, ensure_ascii=False))
else:
    print("usage: python -m aisac_core.projects schema   (prints the aisac.toml JSON Schema)", file=sys.stderr)
    sys.exit(2)
