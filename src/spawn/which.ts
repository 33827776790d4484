// Finds an executable on PATH without a shell, so "missing provider" can say exactly where it looked.
import { accessSync, constants, statSync } from 'node:fs';
import { join, delimiter, isAbsolute } from 'node:path';

export function which(command: string, pathVar: string | undefined): string | null {
  if (command.includes('/')) {
    return isExecutable(command) ? command : null;
  }
  for (const dir of (pathVar ?? '').split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const candidate = join(dir, command);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
