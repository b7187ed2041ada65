"""Report screens: the drill-down pages and writes (pages), and a document's reader and result files (files)."""

from reports.views.files import document_file_view, document_html_view, document_reader_view, document_result_view
from reports.views.pages import (
    category_view,
    document_view,
    drill_view,
    overview_view,
    pause_view,
    refresh_view,
    rerun_view,
    resume_view,
    runtime_view,
)

__all__ = [
    "category_view", "document_file_view", "document_html_view", "document_reader_view", "document_result_view",
    "document_view", "drill_view", "overview_view", "pause_view", "refresh_view", "rerun_view", "resume_view",
    "runtime_view",
]  # fmt: skip
