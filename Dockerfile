# One image for every tensorgrid service: `tensorgrid master | worker | ps | local | health ...`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/tensorgrid
# README* matches nothing when the project has no README; pyproject.toml always matches
COPY pyproject.toml README* ./
COPY tensorgrid ./tensorgrid
COPY services ./services
RUN pip install . \
    && useradd --create-home --uid 1000 tensorgrid

USER tensorgrid
ENV TENSORGRID_HOME=/home/tensorgrid/.tensorgrid
# 8000: the master's HTTP API, 8001: its gRPC MasterService (heartbeats), 2222: a task's gRPC
EXPOSE 8000 8001 2222

ENTRYPOINT ["tensorgrid"]
CMD ["--help"]
