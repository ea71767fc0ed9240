"""The book: ``registry`` (every page, its fixed choices and profiles), ``pages`` (one module per page: its
configure, numbers and claims), ``report`` (what a page shows around its results, glue), ``labels`` (the
masks' names in figures and prose), ``plotting``, ``runner`` (a page under papermill), ``cli`` (the
``rankcollapse`` command) and ``sphinx_figures`` (the figures' cite blocks and exports in the site). The only
layer that knows page names or imports matplotlib, IPython, myst_nb or Sphinx; it holds no science of its own.
"""

__all__ = ["cli", "labels", "pages", "plotting", "registry", "report", "runner", "sphinx_figures"]
