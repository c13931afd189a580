"""A recipe collection laid out as verl's: ``recipe/<name>/main_<name>.py`` and ``recipe/<name>/config/``.

Launched, as the collection's scripts launch them, from a folder that holds both ``verl/`` (a verl checkout, or a
link to the installed package) and ``recipe/``. See docs/recipes.md.
"""
