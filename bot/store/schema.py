"""The tables, as SQLAlchemy Core objects. Changes go through a migration in ``migrations/versions``.

Passing results take no row each. A report points at a ``manifests`` row: the sorted ids of every test
it held and of its plain skips, stored once per repository and shared by every report that held the same
tests, so reading a few tests' histories decodes each distinct manifest once. A result that is not a plain
single-attempt pass or skip (a failed attempt, or more than one attempt) is an ``observations`` row with
its attempts, and overrides the manifest. The report keeps its plain passes' count and total seconds, and
their durations in manifest order (``passed_ms``: what the local HTML report and ``explain`` show); the
durations the judge adds up (a plain pass of a test that failed or retried on the same commit and
context) are also ``pass_times`` rows, so the App's judging never decodes a report's durations.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

repos = Table(
    "repos",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("full_name", String(300), nullable=False, unique=True),
    Column("github_id", BigInteger, nullable=True),
    Column("installation_id", BigInteger, nullable=True),
    Column("default_branch", String(255), nullable=True),
)

contexts = Table(
    "contexts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("key", Text, nullable=False, unique=True),
)

tests = Table(
    "tests",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("repo_id", Integer, ForeignKey("repos.id"), nullable=False),
    Column("key", String(64), nullable=False),
    Column("test_id", Text, nullable=False),
    Column("family", Text, nullable=False),
    Column("classname", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("file", Text, nullable=True),
    Column("line", Integer, nullable=True),
    UniqueConstraint("repo_id", "key", name="uq_tests_repo_key"),
)

reports = Table(
    "reports",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("key", String(64), nullable=False, unique=True),
    Column("repo_id", Integer, ForeignKey("repos.id"), nullable=False),
    Column("context_id", Integer, ForeignKey("contexts.id"), nullable=False),
    Column("commit_sha", String(100), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("run_id", BigInteger, nullable=True),
    Column("run_index", BigInteger, nullable=True),
    Column("started_at", String(40), nullable=True),
    Column("source", Text, nullable=False),
    Column("digest", String(64), nullable=False),
    Column("artifact_id", BigInteger, nullable=True),
    Column("results", Integer, nullable=False),
    Column("manifest_id", Integer, ForeignKey("manifests.id"), nullable=False),
    Column("passed", Integer, nullable=False),  # plain single-attempt passes
    Column("skipped", Integer, nullable=False),  # plain single-attempt skips
    Column("passed_seconds", Float, nullable=False),  # the plain passes' durations added up
    Column("passed_ms", LargeBinary, nullable=False),  # per manifest test, 0 unless a plain pass (codec.pack_ms)
    Index("ix_reports_repo_commit", "repo_id", "commit_sha"),
    Index("ix_reports_repo_started", "repo_id", "started_at"),
)

manifests = Table(
    "manifests",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("repo_id", Integer, ForeignKey("repos.id"), nullable=False),
    Column("digest", String(64), nullable=False),  # SHA-256 of the two arrays
    Column("tests", Integer, nullable=False),
    Column("test_ids", LargeBinary, nullable=False),  # codec.pack_ids: every test the report held
    Column("skipped_ids", LargeBinary, nullable=False),  # codec.pack_ids: those that were plain skips
    UniqueConstraint("repo_id", "digest", name="uq_manifests_repo_digest"),
)

# A plain pass's seconds where the judge adds them up: its test failed or retried in another report of the
# same commit and context (whichever was stored first).
pass_times = Table(
    "pass_times",
    metadata,
    Column("report_id", Integer, ForeignKey("reports.id"), primary_key=True),
    Column("test_id", Integer, ForeignKey("tests.id"), primary_key=True),
    Column("seconds", Float, nullable=False),
    Index("ix_pass_times_test", "test_id"),
)

observations = Table(
    "observations",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("report_id", Integer, ForeignKey("reports.id"), nullable=False),
    Column("test_id", Integer, ForeignKey("tests.id"), nullable=False),
    Column("outcome", String(10), nullable=False),
    Column("attempts", Text, nullable=False),
    Column("duration", Float, nullable=False),
    Column("message", Text, nullable=False),
    Column("details", Text, nullable=True),
    UniqueConstraint("report_id", "test_id", name="uq_observations_report_test"),
    Index("ix_observations_test", "test_id"),
)

installations = Table(
    "installations",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("account", String(300), nullable=False),
    Column("status", String(20), nullable=False),  # active, suspended, deleted
    Column("permissions", Text, nullable=True),  # JSON, as its last installation event granted them
    Column("deleted_at", String(40), nullable=True),  # when its deletion arrived: purged a retention period later
)

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("repo_id", Integer, ForeignKey("repos.id"), nullable=False),
    Column("run_id", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("head_sha", String(64), nullable=False),
    Column("head_branch", Text, nullable=True),
    Column("event", String(50), nullable=True),
    Column("workflow_path", Text, nullable=True),
    Column("run_number", Integer, nullable=True),
    Column("html_url", Text, nullable=True),
    Column("conclusion", String(30), nullable=True),
    Column("run_started_at", String(40), nullable=True),
    Column("updated_at", String(40), nullable=True),
    Column("pull_requests", Text, nullable=False),  # JSON list of numbers
    UniqueConstraint("repo_id", "run_id", "attempt", name="uq_runs_attempt"),
    Index("ix_runs_repo_sha", "repo_id", "head_sha"),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("repo_id", Integer, ForeignKey("repos.id"), nullable=False),
    Column("run_id", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("name", Text, nullable=False),
    Column("conclusion", String(30), nullable=True),
    Column("started_at", String(40), nullable=True),
    Column("completed_at", String(40), nullable=True),
    Column("labels", Text, nullable=False),  # JSON list
    Column("html_url", Text, nullable=True),
    Index("ix_jobs_run", "repo_id", "run_id", "attempt"),
)

check_runs = Table(
    "check_runs",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id"), primary_key=True),
    Column("head_sha", String(64), primary_key=True),
    Column("run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("attempt", Integer, primary_key=True, autoincrement=False),
    Column("check_run_id", BigInteger, nullable=False),
    Column("output_digest", String(64), nullable=True),
    Column("annotations_sent", Text, nullable=False),  # JSON list of fingerprints
)

comments = Table(
    "comments",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id"), primary_key=True),
    Column("pr_number", Integer, primary_key=True),
    Column("comment_id", BigInteger, nullable=False),
    Column("body_digest", String(64), nullable=True),  # what it says (SHA-256 of the body), when known
)

known_flaky = Table(
    "known_flaky",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id"), primary_key=True),
    Column("test_id", Integer, ForeignKey("tests.id"), primary_key=True),
    Column("context_id", Integer, ForeignKey("contexts.id"), primary_key=True),
)

# What could not be judged on a commit, one row per distinct text: named by every check run of the commit.
# ``unjudged_failure`` is the test id of a failed test that shares its name with another in one report.
problems = Table(
    "problems",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id"), primary_key=True),
    Column("head_sha", String(64), primary_key=True),
    Column("digest", String(64), primary_key=True),
    Column("run_id", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("unjudged_failure", Text, nullable=True),
)

# The configuration files last read from GitHub (``owner/name:path``), with their ETags.
config_files = Table(
    "config_files",
    metadata,
    Column("source", String(500), primary_key=True),
    Column("etag", String(200), nullable=True),
    Column("text", Text, nullable=True),
)

# What a click on a check run's button did: one row per check run and button, kept by the first delivery.
actions = Table(
    "actions",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id"), primary_key=True),
    Column("check_run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("identifier", String(20), primary_key=True),
    Column("head_sha", String(64), nullable=False),
    Column("sender", String(100), nullable=False),
    Column("line", Text, nullable=False),
    Index("ix_actions_repo_sha", "repo_id", "head_sha"),
)

# The automatic rerun decision of each run (one row per run, ever); ``attempt`` is the attempt it followed.
reruns = Table(
    "reruns",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id"), primary_key=True),
    Column("run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("head_sha", String(64), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("requested", Boolean, nullable=False),
    Column("line", Text, nullable=False),
    Index("ix_reruns_repo_sha", "repo_id", "head_sha"),
)

# The weekly digest of each installation: one row per ISO week, ever: where it was posted (under the
# installation's digest lock), or why it could not be (``line``; ``/readyz`` warns).
digests = Table(
    "digests",
    metadata,
    Column("installation_id", BigInteger, primary_key=True, autoincrement=False),
    Column("week", String(10), primary_key=True),
    Column("state", String(20), nullable=False),  # posted, not_posted
    Column("repo", String(300), nullable=True),
    Column("issue_number", Integer, nullable=True),
    Column("line", Text, nullable=False),
)
