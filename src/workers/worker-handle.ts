import type { WireError } from "../errors.js";
import type { Channel } from "./channel.js";
import { SlotBackoff } from "./restart-policy.js";

/** A batch the worker holds: its sequence number, its owner's handle, when it was sent, and its timeout. */
export interface InFlight<H> {
  readonly seq: number;
  readonly handle: H;
  /** When it was sent (performance.now() clock). */
  readonly sentAt: number;
  timer: NodeJS.Timeout | undefined;
}

/** One worker as the coordinator sees it. */
export class WorkerHandle<H> {
  state: "starting" | "ready" | "gone" = "starting";
  contentType = "application/json";
  /**
   * The batches the worker holds: at most the pool's `concurrency`, a few. A short list, not a
   * `Map` by sequence number: a Map that takes and gives back an entry per batch rebuilds its
   * table every few batches, and a table it left behind in the old generation keeps the batches
   * it held (their tasks, requests and answers) alive through minor collections
   * (serving/ledger.ts says more).
   */
  readonly flights: InFlight<H>[] = [];
  seq = 0;
  /** The batches it answered: a worker that answered enough has shown the user's code works (restart-policy.ts). */
  answered = 0;
  /** Set when the worker failed to start, with the reason. */
  fatal: WireError | undefined;
  channel!: Channel;
  /** Set once the worker was asked to stop: resolves when it has exited. */
  exited: Promise<void> | undefined;
  onExit: (() => void) | undefined;
  stopTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly workerId: number,
    /** How many batches it may hold at once. */
    readonly concurrency: number,
  ) {}

  get live(): boolean {
    return this.state === "ready";
  }

  /** Ready, and holding fewer batches than it may. */
  get free(): boolean {
    return this.state === "ready" && this.flights.length < this.concurrency;
  }

  /** Takes the batch `seq` out of those it holds, and returns it; undefined when it holds none such. */
  take(seq: number): InFlight<H> | undefined {
    const flights = this.flights;
    for (let i = 0; i < flights.length; i++) {
      const flight = flights[i]!;
      if (flight.seq !== seq) continue;
      flights[i] = flights[flights.length - 1]!;
      flights.pop();
      return flight;
    }
    return undefined;
  }

  /** The batch `seq`, if it holds it. */
  flight(seq: number): InFlight<H> | undefined {
    for (const flight of this.flights) if (flight.seq === seq) return flight;
    return undefined;
  }

  /** Forgets every batch it holds and returns their handles. */
  takeFlights(): H[] {
    const handles: H[] = [];
    for (const flight of this.flights) {
      clearTimeout(flight.timer);
      handles.push(flight.handle);
    }
    this.flights.length = 0;
    return handles;
  }
}

/** What the pool remembers of one worker id across the workers that hold it in turn. */
export class Slot {
  /** Attempts in a row that died before they were ready, whatever ended them. */
  attempts = 0;
  /** The fatal error the last of them reported, if it did. */
  fatal: string | undefined;
  /** A worker of this id has been ready: its start-up is over, and a death is a crash to recover from. */
  wasReady = false;
  readonly backoff = new SlotBackoff();
  /** The next attempt, waiting out its back-off, and when it starts (performance.now() clock). */
  restart: NodeJS.Timeout | undefined;
  restartAt = 0;
}
