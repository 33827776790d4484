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
        properties: {
          code: { type: 'string', pattern: '^[a-z_]+$' },
          message: { type: 'string' },
        },
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
          via: {
            enum: ['ingest', 'answer_folder'],
            description: 'ingest: the runner gets it in its next ingest response',
          },
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
        description: 'Per action (stop, resume, retry, verify, delete, answer, pr): null when the server would ' +
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
      kind: {
        type: 'string',
        examples: ['run.status', 'log', 'question', 'answer', 'check', 'receipt', 'pr', 'cost', 'artifact', 'error'],
      },
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
      repo: {
        type: 'string',
        description: 'absolute path of a registered project (POST /v1/import or the repos setting)',
      },
      provider: { type: 'string' },
      pr: { type: 'boolean' },
      request_id: { type: 'string', description: 'idempotency key' },
    },
  },
  Answer: { type: 'object', required: ['answer'], properties: { answer: { type: 'string' } } },
  RunTarget: {
    type: 'object', required: ['source', 'run'], properties: { source: { type: 'string' }, run: { type: 'string' } },
  },
  Config: {
    type: 'object', required: ['config', 'version'],
    properties: { config: { type: 'object' }, version: { type: 'integer' } },
  },
  ConfigUpdate: {
    description: 'Either a partial object of settings (`{"retention_days": 30}`), or `{config, version?}` as GET ' +
      'answers it; settings not named keep their value, null resets one to its default',
    oneOf: [
      {
        type: 'object', required: ['config'], additionalProperties: false,
        properties: { config: { type: 'object' }, version: { type: 'integer', minimum: 0 } },
      },
      { type: 'object', not: { required: ['config'] } },
    ],
  },
  Empty: { type: 'object', description: 'An empty object; the body may be left out', maxProperties: 0 },
  Deleted: { type: 'object', required: ['deleted'], properties: { deleted: { const: true } } },
  Status: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } },
  ProjectList: {
    type: 'object',
    required: ['items'],
    properties: {
      items: {
        type: 'array',
        items: {
          type: 'object',
          required: ['path', 'via', 'registered_at'],
          properties: {
            path: {
              type: 'string',
              description: 'real path (symbolic links resolved) for imports; as written for repos',
            },
            via: { enum: ['import', 'repos'] },
            registered_at: { ...time, description: 'when it was imported; null for the repos setting' },
          },
        },
      },
    },
  },
  ImportResult: {
    type: 'object',
    required: ['runs', 'events', 'duplicates', 'artifacts', 'skipped'],
    properties: {
      runs: { type: 'integer' },
      events: { type: 'integer' },
      duplicates: { type: 'integer' },
      artifacts: { type: 'integer' },
      skipped: {
        type: 'array',
        items: {
          type: 'object', required: ['entry', 'reason'],
          properties: { entry: { type: 'string' }, reason: { type: 'string' } },
        },
      },
    },
  },
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
      level: { enum: ['low', 'medium', 'high', 'critical'] },
      reasons: { type: 'array', items: { type: 'string' } },
      files: {
        type: 'array',
        items: {
          type: 'object',
          required: ['path', 'insertions', 'deletions', 'flags'],
          properties: {
            path: { type: 'string' }, insertions: { type: 'integer' }, deletions: { type: 'integer' },
            flags: { type: 'array', items: { type: 'string' } },
          },
        },
      },
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
        items: {
          type: 'object', required: ['run', 'seq', 'ts', 'kind'],
          properties: {
            run: { type: 'string' }, seq: { type: 'integer' }, ts: { type: 'string' }, kind: { type: 'string' },
            data: {},
          },
        },
      },
      artifacts: {
        type: 'array',
        items: {
          type: 'object', required: ['run', 'path', 'content_base64'],
          properties: {
            run: { type: 'string' }, path: { type: 'string' }, content_type: { type: 'string' },
            content_base64: { type: 'string', contentEncoding: 'base64' },
          },
        },
      },
      served_repos: {
        type: 'array',
        maxItems: 1000,
        description: 'the repositories this source\'s trigger server serves; replaces the list it reported last',
        items: {
          type: 'object', required: ['name'], additionalProperties: false,
          properties: { name: { type: 'string', description: 'owner/name' } },
        },
      },
    },
  },
  IngestResult: {
    type: 'object',
    required: ['runs', 'events', 'duplicates', 'artifacts', 'control'],
    properties: {
      runs: { type: 'integer' },
      events: { type: 'integer' },
      duplicates: { type: 'integer' },
      artifacts: { type: 'integer' },
      notifications: { type: 'integer', description: 'present when the batch carried notifications' },
      served_repos: { type: 'integer', description: 'present when the batch carried served_repos: how many it serves' },
      control: {
        type: 'array',
        items: {
          type: 'object', required: ['run', 'action'],
          properties: { run: { type: 'string' }, action: { type: 'string' } },
        },
      },
      deleted: {
        type: 'array',
        items: { type: 'string' },
        description:
          'runs of the batch that were deleted on the Control Plane: dropped, with their events and artifacts',
      },
    },
  },
  RepoList: {
    type: 'object',
    required: ['items'],
    properties: {
      items: {
        type: 'array',
        items: {
          type: 'object',
          required: ['name', 'served_by'],
          additionalProperties: false,
          properties: {
            name: { type: 'string', description: 'owner/name, or a folder name for a path (never the path)' },
            served_by: {
              type: 'array', items: { type: 'string' },
              description: 'sources whose trigger server reported serving it (empty: only runs or the repos setting)',
            },
          },
        },
      },
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
    required: ['brief'],
    properties: {
      brief: { type: 'string' },
      pr: { type: 'boolean' },
      request_id: { type: 'string', maxLength: 200 },
      repo: { type: 'string', description: 'a served repository (owner/name); default: the one marked default' },
    },
  },
  Queued: {
    type: 'object', required: ['job_id', 'status'],
    properties: { job_id: { type: 'string' }, status: { const: 'queued' } },
  },
  Skipped: {
    type: 'object',
    required: ['status'],
    properties: { status: { enum: ['skipped', 'duplicate'] }, reason: { type: 'string' } },
  },
  Open: { type: 'object', additionalProperties: true },
  OpenList: {
    type: 'object', required: ['items'], properties: { items: { type: 'array', items: { type: 'object' } } },
  },
} as const;

function page(item: string) {
  return {
    type: 'object',
    required: ['items', 'next_cursor'],
    properties: {
      items: { type: 'array', items: { $ref: `#/components/schemas/${item}` } },
      next_cursor: { type: ['string', 'null'] },
    },
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
  Unauthorized: errorResponse(
    'unauthorized (missing or wrong bearer token; WWW-Authenticate: Bearer) or invalid_signature',
  ),
  Forbidden: errorResponse('loopback_only, proxied_request, forbidden_host, forbidden_origin or forbidden_source'),
  NotFound: errorResponse('not_found'),
  Conflict: errorResponse('invalid_transition or conflict'),
  TooLarge: errorResponse('payload_too_large'),
  UnsupportedType: errorResponse('unsupported_media_type: bodied mutations need application/json'),
  TooMany: errorResponse('too_many_requests (Retry-After)'),
  Unavailable: errorResponse('not_configured (names the missing variable) or unavailable'),
  Other: errorResponse('any other refusal the shared pipeline gives every route: method_not_allowed (405, Allow), ' +
    'request_timeout (408), uri_too_long (414), header_too_large (431), internal_error (500), unavailable (503)'),
};
