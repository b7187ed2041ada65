"""The conversion library: LaTeXML wrapper and its sandbox, log parser, worker client, archive helpers.

It imports nothing from Django, so a worker machine can run it with only latexmlc, bwrap and pyzmq.
"""
