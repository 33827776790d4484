// What goes around the joined Run JSON texts of a runs-list page: the same bytes runsPageJson (run-json-text.ts)
// writes, so a page read from stored texts and one built from the columns are byte-identical.
import type { RunKey } from '../db/run-types.ts';
import { encodeRunCursor } from './run-cursor.ts';

export function pageFrame(next: RunKey | null): { open: string; close: string } {
  return { open: '{"items":[', close: `],"next_cursor":${next ? JSON.stringify(encodeRunCursor(next)) : 'null'}}` };
}
