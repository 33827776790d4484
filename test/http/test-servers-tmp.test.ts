// The test servers' starters give each server a TMPDIR inside the test's own folder: what a server or a process it
// starts writes to tmp is removed with the test, never left in the machine's /tmp beside other tests' and people's.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { startTestControl } from '../helpers/control-server.ts';
import { startTestTrigger } from '../trigger/helpers.ts';

describe("the test servers' temp folder", () => {
  it('is a folder inside the test Control Plane\'s own temp folder', async () => {
    const control = await startTestControl();
    try {
      const tmp = control.deps.env.TMPDIR ?? '';
      assert.ok(tmp.startsWith(`${control.dir}/`), `TMPDIR ${tmp} is outside ${control.dir}`);
      assert.ok(statSync(tmp).isDirectory());
    } finally {
      await control.close();
    }
  });

  it("is a folder inside the test trigger's own HOME", async () => {
    const trigger = await startTestTrigger();
    try {
      const tmp = trigger.env.TMPDIR ?? '';
      assert.ok(tmp.startsWith(`${trigger.home}/`), `TMPDIR ${tmp} is outside ${trigger.home}`);
      assert.ok(statSync(tmp).isDirectory());
    } finally {
      await trigger.cleanup();
    }
  });
});
