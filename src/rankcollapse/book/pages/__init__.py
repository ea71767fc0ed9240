"""One module per computed book page, named as the page (its name in :mod:`rankcollapse.book.registry`).

Each holds the page's ``configure`` (its parameters -> the checked config(s) it computes), its config
dataclasses where it computes in its own module (with its ``compute``) and ``show(results, parameters)``:
everything the page shows of its results, as a :class:`rankcollapse.book.shown.Shown` — the numbers its
prose states, its claims tables, tables, figures and page-specific words. A page module never glues or
displays: the page's one call, :func:`rankcollapse.book.report.present`, glues what ``show`` returns.

- theory and setup pages, computing in their own module: :mod:`~rankcollapse.book.pages.setup`,
  :mod:`~rankcollapse.book.pages.data`, :mod:`~rankcollapse.book.pages.theorem1`,
  :mod:`~rankcollapse.book.pages.theorem2`, :mod:`~rankcollapse.book.pages.counterexample`,
  :mod:`~rankcollapse.book.pages.equilibria`;
- the paper's experiments: :mod:`~rankcollapse.book.pages.fig2`, :mod:`~rankcollapse.book.pages.fig3`,
  :mod:`~rankcollapse.book.pages.fig4`, :mod:`~rankcollapse.book.pages.appendix_g1`;
- the authors' response: :mod:`~rankcollapse.book.pages.sample_size`,
  :mod:`~rankcollapse.book.pages.skip_connections`, :mod:`~rankcollapse.book.pages.pretrained_panels`,
  :mod:`~rankcollapse.book.pages.reviewers` (computes in
  :mod:`~rankcollapse.book.pages._reviewers_theory` and reads the Fig. 2-4 sweeps);
- beyond the paper: :mod:`~rankcollapse.book.pages.mask_design`,
  :mod:`~rankcollapse.book.pages.rmsnorm_decoders`, :mod:`~rankcollapse.book.pages.sliding_window_model`,
  :mod:`~rankcollapse.book.pages.large_models`.

``_common`` holds what several of them share (size limits, the configure makers, the Fig. 2 and Fig. 3
sweeps' fixed choices, the response's claim on the pretrained temperature panels, the decoder pages' rate
table, the clauses of a page's finding); the page modules import nothing from each other. A new page: its
``.md``, its module here, one registry entry and a line in ``_toc.yml``.
"""
