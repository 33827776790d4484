// Reusable OpenAPI 3.1 components (JSON Schema 2020-12) for the Control Plane and trigger server documents.
// Shapes follow DESIGN §3–5; a field the design leaves open stays an open object rather than a guess.
// A request body's properties are also the fields its handler accepts (params.ts bodyFields): one list, no drift.
import { FAILURE_CLASSES, RUN_STATUSES, SEGMENT, VERDICTS } from '../run-json.ts';
import { RUN_KEY } from '../engine/ids.ts';

const nullable = (type: string) => ({ type: [type, 'null'] });
const time = { type: ['string', 'null'], format: 'date-time' };
const str = { type: 'string' };
const int = { type: 'integer' };
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const obj = (required: string[], properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  ({ type: 'object', ...(required.length ? { required } : {}), properties, ...extra });
const array = (items: unknown, extra: Record<string, unknown> = {}) => ({ type: 'array', items, ...extra });
/** A run's cost figures (Run `reported`, `metered`). */
const COST = { cost_usd: nullable('number'), tokens_in: nullable('integer'), tokens_out: nullable('integer') };
/** What ingest and import both count. */
const COUNTS = { runs: int, events: int, duplicates: int, artifacts: int };
const LIST = (item: unknown) => obj(['items'], { items: array(item) });

export const schemas = {
  Error: obj(['error'], {
    error: obj(['code', 'message'], { code: { type: 'string', pattern: '^[a-z_]+$' }, message: str }),
  }),
  Run: obj(['source', 'run', 'status', 'group_id'], {
    source: str, run: str, repo: nullable('string'), group_id: str,
    status: { enum: [...RUN_STATUSES] }, verdict: { enum: [...VERDICTS, null] },
    brief: nullable('string'), origin: nullable('string'), provider: nullable('string'), branch: nullable('string'),
    pr_url: nullable('string'), question: nullable('string'), started_at: time, ended_at: time, updated_at: time,
    cost_usd: { type: ['number', 'null'], description: 'null when cost was not measured, never 0; the metered ' +
      'figure when the gate metered the run, else the reported one' },
    tokens_in: nullable('integer'), tokens_out: nullable('integer'), exit_code: nullable('integer'),
    error: nullable('string'),
    failure: {
      oneOf: [obj(['class', 'reason', 'retryable'], {
        class: { enum: [...FAILURE_CLASSES] }, reason: { type: 'string', maxLength: 4096 },
        retryable: { type: 'boolean' },
      }, { additionalProperties: false }), { type: 'null' }],
      description: 'why a run that did not succeed ended; null while it runs and when it succeeded (docs/engine.md ' +
        '"Why a run failed"); only infra is retryable',
    },
    reported: { type: ['object', 'null'], description: 'what the agent reported (null: nothing)',
      properties: COST },
    metered: { type: ['object', 'null'], description: 'what the egress gate metered from the model APIs\' usage ' +
      '(null: no call metered); unpriced: calls of a model without a price, unknown: calls whose usage was not all ' +
      'read (in the cost at their bounds), doubtful (only once there is one): calls counted at bounds their request ' +
      'could not set for certain (the cost may be low), tunnels: CONNECT tunnels the run opened, which the gate ' +
      'does not read (absent from figures an older gate metered, which did not count them)',
      properties: { ...COST, calls: int, unpriced: int, unknown: int, doubtful: int, tunnels: int } },
    trace_id: {
      type: ['string', 'null'], pattern: '^[0-9a-f]{32}$',
      description: 'the OpenTelemetry trace id of the run\'s spans (docs/deploy.md "Traces"); null before traces',
    },
  }),
  RunDetail: {
    allOf: [ref('Run')],
    ...obj(['artifacts', 'pending_answer', 'attempts', 'refusals', 'key_moved', 'receipt_check'], {
      artifacts: array(obj([], { path: str, content_type: str, size: int, sha256: str })),
      pending_answer: {
        type: ['object', 'null'],
        description: 'An answer given while the run is still blocked (null otherwise): it has not reached the run yet',
        properties: {
          answer: str,
          answered_at: time,
          via: {
            enum: ['ingest', 'answer_folder'], description: 'ingest: the runner gets it in its next ingest response',
          },
          delivered_at: { ...time, description: 'when the runner collected it; null while it waits for its check-in' },
        },
      },
      attempts: array(obj([], {
        source: str, run: str, status: { enum: [...RUN_STATUSES] }, verdict: { enum: [...VERDICTS, null] },
        started_at: time,
      }), { description: 'Runs of the same group_id, oldest first (attempt 1 first); at most 100' }),
      refusals: {
        type: 'object',
        description: 'Per action (stop, resume, retry, verify, delete, answer, pr): null when the server would ' +
          'accept it, else the message of its 409 invalid_transition',
        additionalProperties: { type: ['string', 'null'] },
      },
      key_moved: {
        type: 'boolean',
        description: 'true once the run moved from the key handed to its worker onto the key that was made from (a ' +
          'Kubernetes pod\'s signer; docs/control-data.md "Each run\'s own runner"): its row is since only that ' +
          'runner\'s, never what the worker, whose agent could read the handed key, shipped',
      },
      receipt_check: {
        type: ['object', 'null'],
        description: 'null without a receipt.json artifact; else signed_by: the known key (GET /v1/keys) its ' +
          'signature verifies with, when it does and the receipt is this run\'s, and problem: why not. Only a ' +
          'receipt with a signed_by is a signed receipt: whoever shipped the run wrote the file. ' +
          'unknown_kid: the kid an intact receipt names when no known key has it (register the signer\'s public ' +
          'key as ~/.svc/keys/trusted/<name>.pem); sha256: of the receipt.json bytes checked (null if unread)',
        properties: {
          signed_by: { type: ['object', 'null'], properties: { kid: str, name: str, origin: str } },
          problem: nullable('string'),
          unknown_kid: nullable('string'),
          sha256: nullable('string'),
        },
      },
    }),
  },
  RunEvent: obj(['id', 'source', 'run', 'seq', 'ts', 'kind', 'data'], {
    id: { type: 'integer', description: 'Control Plane monotonic id (SSE id, cursor)' },
    source: str,
    run: str,
    seq: { type: 'integer', description: "runner's per-run sequence" },
    ts: { type: 'string', format: 'date-time' },
    kind: {
      type: 'string',
      examples: ['run.status', 'log', 'question', 'answer', 'check', 'receipt', 'pr', 'cost', 'artifact', 'error'],
    },
    data: {},
  }),
  StartRequest: obj(['repo'], {
    brief: { type: 'string', description: 'what to do, in words' },
    spec_path: { type: 'string', description: 'a .md spec or .json export inside the repository' },
    issue_url: { type: 'string', description: 'an error-tracker issue URL (…/issues/<id>)' },
    repo: {
      type: 'string', description: 'absolute path of a registered project (POST /v1/import or the repos setting)',
    },
    provider: { type: 'string', description: 'coding agent, e.g. claude, codex, gemini (default: the setting)' },
    pr: { type: 'boolean', description: 'open a draft pull request when the run is verified' },
    request_id: { type: 'string', description: 'idempotency key: 1-128 letters, digits, ".", "_", ":" or "-"' },
  }),
  Answer: obj(['answer'], {
    answer: { type: 'string', description: 'the answer, as the agent will read it' },
    origin: { type: 'string', description: 'who answered where the job was asked (the trigger server relays it, e.g. ' +
      'webhook:octocat): recorded as origin:<origin>, which cannot raise the operator\'s daily caps' },
  }),
  RunTarget: obj(['source', 'run'], {
    source: { type: 'string', pattern: SEGMENT.source, description: "the run's source" },
    run: { type: 'string', pattern: SEGMENT.source, description: 'the run id' },
  }),
  Config: obj(['config', 'version'], { config: { type: 'object' }, version: int }),
  ConfigUpdate: {
    description: 'Either a partial object of settings (`{"retention_days": 30}`), or `{config, version?}` as GET ' +
      'answers it; settings not named keep their value, null resets one to its default',
    oneOf: [
      obj(['config'], { config: { type: 'object' }, version: { type: 'integer', minimum: 0 } },
        { additionalProperties: false }),
      { type: 'object', not: { required: ['config'] } },
    ],
  },
  Empty: { type: 'object', description: 'An empty object; the body may be left out', maxProperties: 0 },
  Deleted: obj(['deleted'], { deleted: { const: true } }),
  Status: obj(['status'], { status: { const: 'ok' } }),
  ProjectList: LIST(obj(['path', 'via', 'registered_at'], {
    path: { type: 'string', description: 'real path (symbolic links resolved) for imports; as written for repos' },
    via: { enum: ['import', 'repos'] },
    registered_at: { ...time, description: 'when it was imported; null for the repos setting' },
  })),
  ImportResult: obj(['runs', 'events', 'duplicates', 'artifacts', 'skipped'], {
    ...COUNTS, skipped: array(obj(['entry', 'reason'], { entry: str, reason: str })),
  }),
  Provider: obj(['name', 'available', 'path', 'version', 'tested_version', 'tested_range', 'within_tested_range'], {
    name: str,
    kind: { enum: ['builtin', 'command'] },
    available: { type: 'boolean' },
    path: nullable('string'),
    version: nullable('string'),
    tested_version: { ...nullable('string'), description: 'the version the provider conformance suite drove' },
    tested_range: { ...nullable('string'), description: 'the range that run proves, e.g. ">=2.1.330 <3.0.0"' },
    within_tested_range: { ...nullable('boolean'), description: 'null when the version or the range is unknown' },
    default: { type: 'boolean', description: 'the default_provider setting names it' },
  }),
  /** DESIGN §4: GET /v1/providers answers a bare array, not a page. */
  ProviderList: array(ref('Provider')),
  ReviewRisk: obj(['score', 'level', 'reasons', 'files'], {
    score: { type: 'integer', minimum: 0, maximum: 100 },
    level: { enum: ['low', 'medium', 'high', 'critical'] },
    reasons: array(str),
    files: array(obj(['path', 'insertions', 'deletions', 'flags'], {
      path: str, insertions: int, deletions: int, flags: array(str),
    })),
  }),
  IngestBatch: obj(['source'], {
    source: str,
    runs: array(obj(['run'], {
      run: str,
      run_key: {
        type: ['string', 'null'], pattern: RUN_KEY.source,
        description: 'the key made with the run (by its launcher; for a run the Control Plane queued, by the ' +
          'Control Plane, which binds it at once): the first one shipped binds the run, and later batches that ' +
          'name the run (its row, events, artifacts) without it are refused with 403 forbidden_run; the Control ' +
          'Plane keeps only its SHA-256',
      },
      lease_until: {
        type: ['string', 'integer', 'null'],
        description: 'the time (ISO-8601 or unix ms, as the row\'s times) by which the run\'s runner must have ' +
          'ended it; the first one stored stays, and a run still active past it is ended failed, of class infra ' +
          '(stopped when a stop was asked; a pod\'s seal step sends its Job\'s deadline plus grace; a bound-runs ' +
          'token\'s is ignored)',
      },
    }, { description: 'a Run JSON (DESIGN §3), its run_key and lease_until' })),
    events: array(obj(['run', 'seq', 'ts', 'kind'], { run: str, seq: int, ts: str, kind: str, data: {} })),
    artifacts: array(obj(['run', 'path', 'content_base64'], {
      run: str, path: str, content_type: str, content_base64: { type: 'string', contentEncoding: 'base64' },
    })),
    notifications: array({ type: 'object' }, { description: 'outbound messages about runs (GET /v1/notifications)' }),
    served_repos: array(
      obj(['name'], { name: { type: 'string', description: 'owner/name' } }, { additionalProperties: false }),
      {
        maxItems: 1000,
        description: 'the repositories this source\'s trigger server serves; replaces the list it reported last',
      },
    ),
  }),
  IngestResult: obj(['runs', 'events', 'duplicates', 'artifacts', 'control'], {
    ...COUNTS,
    notifications: { type: 'integer', description: 'present when the batch carried notifications' },
    served_repos: { type: 'integer', description: 'present when the batch carried served_repos: how many it serves' },
    control: array(obj(['run', 'action'], { run: str, action: str })),
    deleted: array(str, {
      description: 'runs of the batch that were deleted on the Control Plane: dropped, with their events and artifacts',
    }),
    stop_asked: array(str, {
      description: 'runs the batch wrote with the key they moved onto (a pod\'s signer) that a stop was ever asked for',
    }),
    last_seq: array(obj(['run', 'seq'], { run: str, seq: int }), {
      description: 'for the runs the batch wrote with the key they moved onto, the highest event seq stored',
    }),
  }),
  RepoList: LIST(obj(['name', 'served_by'], {
    name: { type: 'string', description: 'owner/name, or a folder name for a path (never the path)' },
    served_by: array(str, {
      description: 'sources whose trigger server reported serving it (empty: only runs or the repos setting)',
    }),
  }, { additionalProperties: false })),
  ImportRequest: obj(['path'], { path: str }),
  Job: obj(['id', 'origin', 'status', 'args'], {
    id: str,
    origin: str,
    repo: { ...nullable('string'), description: 'the served repository (owner/name) the job was routed to' },
    status: { enum: ['queued', 'running', 'succeeded', 'failed', 'interrupted'] },
    brief: nullable('string'),
    args: array(str, { description: 'exact argv after `svc`' }),
    created_at: time,
    started_at: time,
    finished_at: time,
    run: { oneOf: [ref('RunTarget'), { type: 'null' }] },
    exit_code: nullable('integer'),
    infra_retries: {
      type: 'integer', minimum: 0,
      description: 'times its run was started over automatically after an infra failure (never the job itself)',
    },
    requeues: {
      type: 'integer', minimum: 0,
      description: 'times a restart queued it again: its launch, lost with the server, had made no run',
    },
    summary: nullable('string'),
    error: nullable('string'),
  }),
  JobRequest: obj(['brief'], {
    brief: str,
    pr: { type: 'boolean' },
    request_id: { type: 'string', maxLength: 200 },
    repo: { type: 'string', description: 'a served repository (owner/name); default: the one marked default' },
  }, { description: 'a brief (or spec/issue reference) to run as `svc start`' }),
  Queued: obj(['job_id', 'status'], { job_id: str, status: { const: 'queued' } }),
  // `answered`/`refused`: a `/svc answer` comment answering a blocked run (docs/trigger.md "Questions and answers").
  Skipped: obj(['status'], {
    status: { enum: ['skipped', 'duplicate', 'answered', 'refused'] }, reason: str, job_id: str, run: str,
  }),
  Open: { type: 'object', additionalProperties: true },
  OpenList: LIST({ type: 'object' }),
  RunPage: page('Run'),
  EventPage: page('RunEvent'),
  OpenPage: page('Open'),
};

function page(item: string) {
  return obj(['items', 'next_cursor'], { items: array(ref(item)), next_cursor: { type: ['string', 'null'] } });
}

function errorResponse(description: string) {
  return { description, content: { 'application/json': { schema: ref('Error') } } };
}

export const responses = {
  BadRequest: errorResponse('bad_request, invalid_json or invalid_param'),
  Unauthorized: errorResponse(
    'unauthorized (missing or wrong bearer token; WWW-Authenticate: Bearer) or invalid_signature',
  ),
  Forbidden: errorResponse(
    'loopback_only, proxied_request, forbidden_host, forbidden_origin, forbidden_source or forbidden_run',
  ),
  NotFound: errorResponse('not_found'),
  Conflict: errorResponse('invalid_transition or conflict'),
  TooLarge: errorResponse('payload_too_large'),
  UnsupportedType: errorResponse('unsupported_media_type: bodied mutations need application/json'),
  TooMany: errorResponse('too_many_requests (Retry-After)'),
  Unavailable: errorResponse('not_configured (names the missing variable) or unavailable'),
  Other: errorResponse('any other refusal the shared pipeline gives every route: method_not_allowed (405, Allow), ' +
    'request_timeout (408), uri_too_long (414), header_too_large (431), internal_error (500), unavailable (503)'),
};
