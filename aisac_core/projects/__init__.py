"""Projects: a folder with an ``aisac.toml`` manifest, bootstrapped (validated and traced) into the settings, tools,
prompt overlays, workflow-graph augmentation and plugins it is served with.

Modules: :mod:`.manifest` (the manifest model, JSON Schema, loading), :mod:`.extensions` (extension modules and
their functions), :mod:`.prompts` (role prompt overlays), :mod:`.bootstrap` (the traced steps), :mod:`.templates`
(``aisac init``), :mod:`.hosts` (host configuration files).
"""

from aisac_core.projects.bootstrap import Bootstrapped, Step, bootstrap, project_data_dir
from aisac_core.projects.extensions import load_module, public_functions
from aisac_core.projects.manifest import (
    MANIFEST,
    PROJECT_NAMESPACE,
    BootstrapError,
    Manifest,
    Project,
    find_manifest,
    load_manifest,
    manifest_json_schema,
    slugify,
)
from aisac_core.projects.prompts import PromptOverlay, compose_prompt, known_roles, load_prompts
from aisac_core.projects.templates import init_project, list_templates, templates_dir

__all__ = [
    "MANIFEST",
    "PROJECT_NAMESPACE",
    "BootstrapError",
    "Bootstrapped",
    "Manifest",
    "Project",
    "PromptOverlay",
    "Step",
    "bootstrap",
    "compose_prompt",
    "find_manifest",
    "init_project",
    "known_roles",
    "list_templates",
    "load_prompts",
    "load_manifest",
    "load_module",
    "manifest_json_schema",
    "project_data_dir",
    "public_functions",
    "slugify",
    "templates_dir",
]
