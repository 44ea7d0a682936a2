"""Sphinx configuration of the course's website (`make site`).

`python -m course_lib.authoring.site` copies the pages into a staging folder (`_build/site-src/`: the landing page
from the README, a page per lecture and per exercise notebook, the instructors' and contributors' pages) and runs
Sphinx there with this file. The notebooks are never executed: each page shows the outputs its notebook stores.

Everything a page loads comes from the site itself: MathJax from the `sphinx-mathjax-offline` package, the theme's
fonts and scripts from its own `_static/`, sphinx-copybutton's script and its clipboard helper, the course's
`_static/course.js`, and no ipywidgets scripts (their pictures are stored as plain images).
"""

project = "From Policy Gradients to GRPO"
author = "the course's authors"
html_show_copyright = False  # the theme already says "By the course's authors"

extensions = [
    "myst_nb",  # notebooks and Markdown (MyST) pages
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3.2.2 copied into _static/mathjax/, so no page asks a CDN for it
    "sphinx_copybutton",  # a copy button on every code cell and command block
]

# sphinx-copybutton: on the code a reader runs (cells, commands), not on outputs, which are results to read.
copybutton_selector = "div.cell_input div.highlight pre, div.highlight-bash div.highlight pre"
copybutton_exclude = ".linenos, .gp"

# myst-nb: render what the notebooks store, never run them.
nb_execution_mode = "off"
nb_merge_streams = True  # a cell's consecutive prints in one box
nb_ipywidgets_js = {}  # no require.js nor widget manager from a CDN: the site shows each widget's stored picture
myst_enable_extensions = ["dollarmath", "amsmath"]  # $...$ and $$...$$ as in JupyterLab
myst_dmath_double_inline = True  # $$...$$ inside a paragraph or a list item, as JupyterLab displays it
myst_heading_anchors = 3  # README-style links to headings (#the-two-commands) resolve

exclude_patterns = ["**.ipynb_checkpoints"]
highlight_language = "none"  # a fence without a language (the README's tree) is text; notebook cells stay Python
suppress_warnings = ["myst.header"]  # a notebook may skip a heading level; the page still reads well

html_theme = "sphinx_book_theme"
html_title = "From Policy Gradients to GRPO"
html_favicon = "_static/favicon.svg"  # without one, browsers ask for /favicon.ico, which the site does not have
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_js_files = ["course.js"]  # figures open full size on click; search snippets without raw TeX
# Sphinx would link a figure stored with its size (150 dpi, shown at 100) to its file itself, and only that one:
# course.js links every figure, the same way.
html_scaled_image_link = False
html_copy_source = False  # the download links give the notebooks themselves, not the staged copies
html_show_sourcelink = False
html_last_updated_fmt = None
html_context = {"default_mode": "light"}  # without it the theme logs "invalid theme mode" on a first visit
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": False,  # it would offer the staged copy; each page links the real notebook
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
}
