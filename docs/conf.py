"""Sphinx configuration of ldpsim's documentation site (`make docs`, warnings are errors)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the local extension below

project = "ldpsim"
release = metadata.version("ldpsim")
version = release
author = "ldpsim developers"
copyright = "ldpsim developers"

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "myst_parser",
    "sphinxarg.ext",
    "ldpsim_docs",  # docs/ldpsim_docs.py: the pages generated from the code
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# docs/README.md is the folder's index on a code host; the site's index is index.md.
exclude_patterns = ["README.md", "generated/*.txt"]

# The markdown docs: $...$ math, and the section anchors their tables of contents link to.
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 4

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# numpydoc renders each docstring's Parameters, Returns and Raises sections; the member
# tables it would add for classes list internals (compiled callbacks) that are no API.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# Options such as --scheduler stay two hyphens (not an en dash).
smartquotes = False

html_theme = "alabaster"
html_title = f"ldpsim {release}"
