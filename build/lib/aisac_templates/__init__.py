"""The project templates that ship with aisac (``aisac init --template NAME``): one folder per template, each with
an ``aisac.toml`` manifest, prompt overlays, sample data and extension modules. Installed as the import package
``aisac_templates`` so an installed aisac finds them; nothing here is imported as code."""
