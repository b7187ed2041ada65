"""The conversion library: LaTeXML wrapper, log parser, worker client, archive helpers.

It imports nothing from Django, so a worker machine can run it with only latexmlc and pyzmq.
"""
