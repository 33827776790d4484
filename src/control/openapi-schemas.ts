// Reusable OpenAPI 3.1 components (JSON Schema 2020-12) for the Control Plane and trigger server documents.
// Shapes follow DESIGN §3–5; a field the design leaves open stays an open object rather than a guess.
import { RUN_STATUSES, VERDICTS } from '../run-json.ts';

const nullable = (type: string) => ({ type: [type, 'null'] });
const time = { type: ['string', 'null'], format: 'date-time' };

export const schemas = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message'],
        properties: { code: { type: 'string', pattern: '^[a-z_]+$' }, message: { type: 'string' } },
      },
    },
  },
  Run: {
    type: 'object',
    required: ['source', 'run', 'status', 'group_id'],
    properties: {
      source: { type: 'string' },
      run: { type: 'string' },
      repo: nullable('string'),
      group_id: { type: 'string' },
      status: { enum: [...RUN_STATUSES] },
      verdict: { enum: [...VERDICTS, null] },
      brief: nullable('string'),
      origin: nullable('string'),
      provider: nullable('string'),
      branch: nullable('string'),
      pr_url: nullable('string'),
      question: nullable('string'),
      started_at: time,
      ended_at: time,
      updated_at: time,
      cost_usd: { type: ['number', 'null'], description: 'null when cost was not measured, never 0' },
      tokens_in: nullable('integer'),
      tokens_out: nullable('integer'),
      exit_code: nullable('integer'),
      error: nullable('string'),
    },
  },
  RunDetail: {
    allOf: [{ $ref: '#/components/schemas/Run' }],
    type: 'object',
    required: ['artifacts', 'pending_answer', 'attempts', 'refusals'],
    properties: {
      artifacts: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            path: { type: 'string' }, content_type: { type: 'string' },
            size: { type: 'integer' }, sha256: { type: 'string' },
          },
        },
      },
      pending_answer: {
        type: ['object', 'null'],
        description: 'An answer given while the run is still blocked (null otherwise): it has not reached the run yet',
        properties: {
          answer: { type: 'string' },
          answered_at: time,
          via: { enum: ['ingest', 'answer_folder'], description: 'ingest: the runner gets it in its next ingest response' },
          delivered_at: { ...time, description: 'when the runner collected it; null while it waits for its check-in' },
        },
      },
      attempts: {
        type: 'array',
        description: 'Runs of the same group_id, oldest first (attempt 1 first); at most 100',
        items: {
          type: 'object',
          properties: {
            source: { type: 'string' }, run: { type: 'string' }, status: { enum: [...RUN_STATUSES] },
            verdict: { enum: [...VERDICTS, null] }, started_at: time,
          },
        },
      },
      refusals: {
        type: 'object',
        description: 'Per action (stop, resume, retry, verify, delete, answer): null when the server would ' +
          'accept it, else the message of its 409 invalid_transition',
        additionalProperties: { type: ['string', 'null'] },
      },
    },
  },
  RunEvent: {
    type: 'object',
    required: ['id', 'source', 'run', 'seq', 'ts', 'kind', 'data'],
    properties: {
      id: { type: 'integer', description: 'Control Plane monotonic id (SSE id, cursor)' },
      source: { type: 'string' },
      run: { type: 'string' },
      seq: { type: 'integer', description: "runner's per-run sequence" },
      ts: { type: 'string', format: 'date-time' },
      kind: { type: 'string', examples: ['run.status', 'log', 'question', 'answer', 'check', 'receipt', 'pr', 'cost', 'artifact', 'error'] },
      data: {},
    },
  },
  StartRequest: {
    type: 'object',
    required: ['repo'],
    properties: {
      brief: { type: 'string' },
      spec_path: { type: 'string' },
      issue_url: { type: 'string' },
      repo: { type: 'string', description: 'absolute path of the repository' },
      provider: { type: 'string' },
      pr: { type: 'boolean' },
      request_id: { type: 'string', description: 'idempotency key' },
    },
  },
  Answer: { type: 'object', required: ['answer'], properties: { answer: { type: 'string' } } },
  RunTarget: { type: 'object', required: ['source', 'run'], properties: { source: { type: 'string' }, run: { type: 'string' } } },
  Config: { type: 'object', required: ['config', 'version'], properties: { config: { type: 'object' }, version: { type: 'integer' } } },
  Provider: {
    type: 'object',
    required: ['name', 'available', 'path', 'version', 'tested_version', 'tested_range', 'within_tested_range'],
    properties: {
      name: { type: 'string' },
      kind: { enum: ['builtin', 'command'] },
      available: { type: 'boolean' },
      path: nullable('string'),
      version: nullable('string'),
      tested_version: { ...nullable('string'), description: 'the version the provider conformance suite drove' },
      tested_range: { ...nullable('string'), description: 'the range that run proves, e.g. ">=2.1.330 <3.0.0"' },
      within_tested_range: { ...nullable('boolean'), description: 'null when the version or the range is unknown' },
      default: { type: 'boolean', description: 'the default_provider setting names it' },
    },
  },
  /** DESIGN §4: GET /v1/providers answers a bare array, not a page. */
  ProviderList: { type: 'array', items: { $ref: '#/components/schemas/Provider' } },
  ReviewRisk: {
    type: 'object',
    required: ['score', 'level', 'reasons', 'files'],
    properties: {
      score: { type: 'integer', minimum: 0, maximum: 100 },
      level: { type: 'string' },
      reasons: { type: 'array', items: { type: 'string' } },
      files: { type: 'array' },
    },
  },
  IngestBatch: {
    type: 'object',
    required: ['source'],
    properties: {
      source: { type: 'string' },
      runs: { type: 'array', items: { type: 'object' } },
      events: {
        type: 'array',
        items: { type: 'object', required: ['run', 'seq', 'ts', 'kind'], properties: { run: { type: 'string' }, seq: { type: 'integer' }, ts: { type: 'string' }, kind: { type: 'string' }, data: {} } },
      },
      artifacts: {
        type: 'array',
        items: { type: 'object', required: ['run', 'path', 'content_base64'], properties: { run: { type: 'string' }, path: { type: 'string' }, content_type: { type: 'string' }, content_base64: { type: 'string', contentEncoding: 'base64' } } },
      },
    },
  },
  IngestResult: {
    type: 'object',
    properties: {
      runs: { type: 'integer' },
      events: { type: 'integer' },
      duplicates: { type: 'integer' },
      artifacts: { type: 'integer' },
      control: { type: 'array', items: { type: 'object', properties: { run: { type: 'string' }, action: { type: 'string' } } } },
    },
  },
  ImportRequest: { type: 'object', required: ['path'], properties: { path: { type: 'string' } } },
  Job: {
    type: 'object',
    required: ['id', 'origin', 'status', 'args'],
    properties: {
      id: { type: 'string' },
      origin: { type: 'string' },
      repo: { ...nullable('string'), description: 'the served repository (owner/name) the job was routed to' },
      status: { enum: ['queued', 'running', 'succeeded', 'failed', 'interrupted'] },
      brief: nullable('string'),
      args: { type: 'array', items: { type: 'string' }, description: 'exact argv after `svc`' },
      created_at: time,
      started_at: time,
      finished_at: time,
      run: { oneOf: [{ $ref: '#/components/schemas/RunTarget' }, { type: 'null' }] },
      exit_code: nullable('integer'),
      summary: nullable('string'),
      error: nullable('string'),
    },
  },
  JobRequest: {
    type: 'object',
    description: 'a brief (or spec/issue reference) to run as `svc start`',
    properties: {
      brief: { type: 'string' },
      pr: { type: 'boolean' },
      request_id: { type: 'string' },
      repo: { type: 'string', description: 'a served repository (owner/name); default: the one marked default' },
    },
  },
  Queued: { type: 'object', required: ['job_id', 'status'], properties: { job_id: { type: 'string' }, status: { const: 'queued' } } },
  Skipped: {
    type: 'object',
    required: ['status'],
    properties: { status: { enum: ['skipped', 'duplicate'] }, reason: { type: 'string' } },
  },
  Open: { type: 'object', additionalProperties: true },
} as const;

function page(item: string) {
  return {
    type: 'object',
    required: ['items', 'next_cursor'],
    properties: { items: { type: 'array', items: { $ref: `#/components/schemas/${item}` } }, next_cursor: { type: ['string', 'null'] } },
  };
}

export const pageSchemas = {
  RunPage: page('Run'),
  EventPage: page('RunEvent'),
  OpenPage: page('Open'),
};

function errorResponse(description: string) {
  return { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
}

export const responses = {
  BadRequest: errorResponse('bad_request, invalid_json or invalid_param'),
  Unauthorized: errorResponse('unauthorized (missing or wrong bearer token; WWW-Authenticate: Bearer) or invalid_signature'),
  Forbidden: errorResponse('loopback_only, proxied_request, forbidden_host, forbidden_origin or forbidden_source'),
  NotFound: errorResponse('not_found'),
  Conflict: errorResponse('invalid_transition or conflict'),
  TooLarge: errorResponse('payload_too_large'),
  UnsupportedType: errorResponse('unsupported_media_type: bodied mutations need application/json'),
  TooMany: errorResponse('too_many_requests (Retry-After)'),
  Unavailable: errorResponse('not_configured (names the missing variable) or unavailable'),
};
