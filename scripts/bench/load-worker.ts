// Child-process entry of the load generator, so the client never shares an event loop with the server
// it measures. Protocol over IPC: {type:'load', job} → {type:'result'}; {type:'sse', job} → {type:'ready'},
// then {type:'finish', total, graceMs} → {type:'result'}.
import { runLoad, type LoadJob } from './load.ts';
import { openSubscribers, type SseJob, type Subscribers } from './sse-subscribers.ts';

type Message =
  | { type: 'load'; job: LoadJob }
  | { type: 'sse'; job: SseJob }
  | { type: 'finish'; total: number; graceMs: number };

function reply(message: unknown): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) resolve();
    else process.send(message, undefined, {}, () => resolve());
  });
}

let subscribers: Subscribers | undefined;

process.on('message', (raw) => {
  const message = raw as Message;
  const work = (async () => {
    if (message.type === 'load') {
      await reply({ type: 'result', result: await runLoad(message.job) });
      process.disconnect();
    } else if (message.type === 'sse') {
      subscribers = await openSubscribers(message.job);
      await reply({ type: 'ready', connected: subscribers.connected, failed: subscribers.failed });
    } else if (message.type === 'finish' && subscribers) {
      await reply({ type: 'result', result: await subscribers.finish(message.total, message.graceMs) });
      process.disconnect();
    }
  })();
  work.catch(async (err: unknown) => {
    await reply({ type: 'error', message: err instanceof Error ? err.message : String(err) });
    process.disconnect();
  });
});
