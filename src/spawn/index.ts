// The one spawn policy (DESIGN §7a, §8): every child process svc starts gets its environment, argv,
// limits and isolation from this folder. Call sites import from here, never build env themselves.
export { childEnv, isSecretName, isLauncherName, SVC_SECRET_NAMES, type ChildKind } from './env.ts';
export { startChild, runSync, runQuiet, runCollect, type ChildSpec, type Finished } from './start.ts';
export { bwrapArgv, type SandboxPlan } from './bwrap-argv.ts';
export { providerFolders } from './provider-folders.ts';
export { probeSandbox, BWRAP_HINT, type SandboxProbe } from './probe.ts';
