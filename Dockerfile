FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# LaTeXML for the conversion workers and POST /convert (Debian's package brings TeX Live's pieces),
# bubblewrap for the sandbox every conversion runs in.
RUN apt-get update && apt-get install -y --no-install-recommends latexml bubblewrap && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml ./
RUN pip install --upgrade pip && pip install -e .
COPY . .
RUN useradd --create-home ccs && mkdir -p /app/var && chown -R ccs /app/var
USER ccs
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--worker-class", "gthread", "--threads", "8"]
