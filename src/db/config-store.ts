// The one-row config table: a JSON body and a version that rises by one on every write (for If-Match).
import { ConflictError } from '../errors.ts';
import { transaction, type Db } from './open.ts';

export interface StoredConfig {
  /** Stored values only; merge with the schema's defaults before use. */
  values: Record<string, unknown>;
  /** 0 until the first write. */
  version: number;
  updated_at: number | null;
}

export class ConfigVersionConflict extends ConflictError {
  readonly current: number;
  constructor(current: number) {
    super(`Config is at version ${current}`);
    this.current = current;
  }
}

export type ConfigStore = ReturnType<typeof createConfigStore>;

export function createConfigStore(db: Db, clock: () => number = Date.now) {
  const select = db.prepare('SELECT version, body, updated_at FROM config WHERE id = 1');
  const upsert = db.prepare(
    'INSERT INTO config (id, version, body, updated_at) VALUES (1, ?, ?, ?) ' +
      'ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body, ' +
      'updated_at = excluded.updated_at',
  );

  function read(): StoredConfig {
    const row = select.get() as { version: number; body: string; updated_at: number } | undefined;
    if (!row) return { values: {}, version: 0, updated_at: null };
    const values = JSON.parse(row.body) as Record<string, unknown>;
    return { values, version: row.version, updated_at: row.updated_at };
  }

  return {
    read,
    /** One transaction, so two writers cannot both win; ConfigVersionConflict when `expectedVersion` is not it. */
    update(fn: (current: Record<string, unknown>) => Record<string, unknown>, expectedVersion?: number): StoredConfig {
      return transaction(db, () => {
        const current = read();
        if (expectedVersion !== undefined && expectedVersion !== current.version) {
          throw new ConfigVersionConflict(current.version);
        }
        const values = fn(current.values);
        const next = { values, version: current.version + 1, updated_at: clock() };
        upsert.run(next.version, JSON.stringify(values), next.updated_at);
        return next;
      });
    },
  };
}
