"""Paper reproductions and theorem checks, built only on flowsim's public API.

``flowsim.reproduce.report.reproduce(suite, out)`` runs every check of a suite and writes ``out/report.md``
with one section per claim: statement, setting, measured numbers, verdict, figure.
"""
