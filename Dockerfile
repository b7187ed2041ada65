# One image for every role of docker-compose.yml and deploy/kubernetes: web, Celery, beat, the dispatcher,
# the LaTeXML workers and the warm engine of POST /convert. `make deploy-check` builds and runs it
# (docs/deploy.md).
FROM debian:bookworm-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
# Debian's Python (3.11 in bookworm) in a virtualenv of the image's own, then the conversion environment of
# the workers and POST /convert (LaTeXML, the TeX Live collections real papers load, ImageMagick and
# Ghostscript for figures) and bubblewrap, the sandbox each latexmlc runs in: the one list `make run`
# installs too.
COPY scripts/system-packages /usr/local/sbin/ccs-system-packages
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       python3 python3-venv ca-certificates >/dev/null \
    && ccs-system-packages \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv
RUN useradd --create-home --uid 10001 ccs
WORKDIR /app
# The exact versions of requirements.lock (make lock), as `make run` installs them.
COPY pyproject.toml requirements.lock ./
RUN pip install -q --upgrade pip && pip install -q -r requirements.lock
COPY . .
RUN pip install -q --no-deps -e .
# Every directory docker-compose.yml mounts a volume on exists here and belongs to ccs: a new named volume
# starts as a copy of it, owner included, so the services (which run as ccs) can write to it.
RUN mkdir -p /app/var/corpora /app/var/exports /app/var/results /app/var/beat /app/var/run \
    && chown -R ccs:ccs /app/var
ENV VAR_DIR=/app/var
USER ccs
EXPOSE 8000 51695 51696
# The web server's check (the default command); docker-compose.yml gives each other role its own.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--worker-class", "gthread", "--threads", "8", "--logger-class", "config.gunicorn.TokenMaskingLogger"]
