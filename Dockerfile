# The streammetrics Kafka service: `docker build -t streammetrics .`, then
# `docker run streammetrics consume --bootstrap-servers HOST:PORT --topic ... --output-topic ...`.
# The image also runs `replay` (JSONL, CSV, Parquet: the parquet extra) and `report` (the report extra).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /build
COPY pyproject.toml README.md ./
COPY streammetrics ./streammetrics
COPY consumers ./consumers
RUN pip install ".[kafka,report,parquet]" \
    && cd / && rm -rf /build \
    && useradd --create-home --uid 10001 --user-group streammetrics \
    && mkdir /state && chown streammetrics:streammetrics /state

USER streammetrics
WORKDIR /home/streammetrics
# Checkpoints (--state-dir /state); a named volume mounted here inherits the ownership above.
VOLUME ["/state"]
EXPOSE 9108
ENTRYPOINT ["streammetrics"]
CMD ["--help"]
