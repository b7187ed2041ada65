FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# The conversion environment of the workers and POST /convert (LaTeXML, the TeX Live collections real
# papers load, ImageMagick and Ghostscript for figures) and bubblewrap, the sandbox each latexmlc runs in:
# the one list `make run` installs too.
COPY scripts/system-packages /usr/local/sbin/ccs-system-packages
RUN ccs-system-packages && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 10001 ccs
WORKDIR /app
# The exact versions of requirements.lock (make lock), as `make run` installs them.
COPY pyproject.toml requirements.lock ./
RUN pip install --upgrade pip && pip install -r requirements.lock && pip install --no-deps -e .
COPY . .
# Every directory docker-compose.yml mounts a volume on exists here and belongs to ccs: a new named volume
# starts as a copy of it, owner included, so the services (which run as ccs) can write to it.
RUN mkdir -p /app/var/corpora /app/var/exports /app/var/results /app/var/beat \
    && chown -R ccs:ccs /app/var
ENV VAR_DIR=/app/var
USER ccs
EXPOSE 8000 51695 51696
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--worker-class", "gthread", "--threads", "8", "--logger-class", "config.gunicorn.TokenMaskingLogger"]
