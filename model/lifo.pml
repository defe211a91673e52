/*
 * The LIFO queue's protocol: create -> stream -> trigger -> process,
 * leases with fencing tokens, attempts, the safety sweep and tail calls.
 *
 * Checked (model/check):
 *   safety    at most one outcome is committed per task and life (a redrive
 *             starts a new life), only by the claim that holds the task's
 *             current token; a deleted task never comes back (assertions);
 *             an expired task is never claimed, and a shed never lands on
 *             an outcome (a shed is the life's one outcome too);
 *   liveness  every task eventually ends SUCCESS, FAILURE, EXPIRED (shed)
 *             or deleted, although stream events and tail calls may be
 *             lost, workers may crash at any point, a task may expire at
 *             any moment, and an operator redrives a failed or shed task
 *             or deletes one at any moment, racing late finishes of stale
 *             claims (LTL <> all_done, weak fairness).
 *
 * Expiry: a task's TTL may run out at any moment (at most MAX_EXPIRIES
 * times in a run). From then on no claim takes it (the claim's condition
 * `expiresAt > now`), and whoever reads its index entry sheds it (the
 * sweep's reaper, or a processor's claim read: the same conditional
 * update, so one proctype stands for both): PENDING, or TAKEN with a lapsed
 * lease, becomes EXPIRED, which leaves the claimable index.
 *
 * With more than one processor (ProcessorCount) an invocation first takes
 * its shard group's lease (a fenced item of its own); if it is held, the
 * invocation does nothing and makes no tail call (Held). Here both workers
 * contend for the one group that holds both tasks. Task safety must not
 * rest on the group lease, so the model lets it expire at any moment too
 * (then two invocations claim from one group at once), and a crashed
 * holder keeps it until it expires.
 *
 * Latest wins per key (-DSUPERSEDE): task 1 has task 0's supersedeKey and
 * was created after it, so its write (one transaction) supersedes task 0
 * if it is PENDING, or marks it if it is TAKEN; a marked task is never
 * claimed again and is never put back (a finish that would retry it, or a
 * reader of its lapsed lease, ends it SUPERSEDED). Task 0's write may also
 * land after task 1's: it is then written SUPERSEDED. Checked: once task 1
 * is written, task 0 never starts (until an operator redrives it).
 *
 * Abstractions: time is a lease that may expire at any moment (a slow
 * worker is a worker whose lease expired); "the sweep runs every minute"
 * is a process that may publish a wake-up whenever a claimable task exists;
 * Lambda's async queue of wake-ups is a bounded counter. Crashes, dropped
 * events and lost tail calls are bounded so that runs terminate.
 */

#define TASKS        2
#define WORKERS      2
#define MAX_ATTEMPTS 2
#define MAX_WAKEUPS  2
#define NOBODY       255
/* model/check also runs the model with -DGROUP_LEASE and smaller bounds */
#ifndef MAX_CRASHES
#define MAX_CRASHES  2
#endif
#ifndef MAX_DROPS
#define MAX_DROPS    2
#endif
#ifndef MAX_REDRIVES
#define MAX_REDRIVES 1
#endif
#ifndef MAX_DELETES
#define MAX_DELETES  1
#endif
/* model/check runs the expiry configuration with -DMAX_EXPIRIES=1 */
#ifndef MAX_EXPIRIES
#define MAX_EXPIRIES 0
#endif

mtype = { PENDING, TAKEN, SUCCESS, FAILURE, EXPIRED, DELETED, SUPERSEDED };

mtype status[TASKS];
byte  token[TASKS];      /* fencing token, +1 per claim */
bool  lease[TASKS];      /* lease still running */
byte  attempts[TASKS];
byte  commits[TASKS];    /* outcomes committed in this life (a redrive starts a new one) */
bool  created[TASKS];
bool  expired[TASKS];    /* past expiresAt (until a redrive gives a new expiry) */
bool  was_deleted;       /* task 0 was deleted by the operator */
bool  marked[TASKS];     /* supersededBy set on a TAKEN task by a newer task's write */
bool  succ[TASKS];       /* a newer task with its key was written (this life) */
byte  gholder = NOBODY;  /* the worker holding the shard group's lease */

byte wakeups = 0;        /* Lambda's queue of async invocations of process */
byte crashes = 0;
byte drops = 0;
byte inserts = 0;        /* stream records not yet seen by trigger */
byte redrives = 0;
byte deletes = 0;
byte expiries = 0;

#define claimable(t) (created[t] && !expired[t] && !marked[t] && (status[t] == PENDING || (status[t] == TAKEN && !lease[t])))
/* a lapsed claim that a newer task's write marked: its reader ends it */
#define endable(t) (created[t] && marked[t] && status[t] == TAKEN && !lease[t])
#define sheddable(t) (created[t] && expired[t] && (status[t] == PENDING || (status[t] == TAKEN && !lease[t])))
#define any_claimable (claimable(0) || claimable(1) || endable(0) || endable(1))
#define ended(t) (status[t] == SUCCESS || status[t] == FAILURE || status[t] == EXPIRED || status[t] == DELETED || status[t] == SUPERSEDED)
#define all_done (ended(0) && ended(1))

inline wake() {
  if
  :: wakeups < MAX_WAKEUPS -> wakeups++
  :: else -> skip            /* already queued: another wake-up adds nothing */
  fi
}

/* create: writes PENDING tasks (claimable), one stream record each. With
   SUPERSEDE, task 1 (created after task 0, with its key) is the newer: its
   write is one transaction that also supersedes task 0 (PENDING ->
   SUPERSEDED, an outcome) or marks it (TAKEN). Or task 0's write is held
   back past task 1's (a slow client, a conflict's resends): it finds the
   key's newest newer than itself, and is written SUPERSEDED, never
   claimable (no stream record passes the filter). */
active proctype Producer() {
  byte t = 0;
#ifdef SUPERSEDE
  if
  :: skip
  :: atomic { created[1] = true; status[1] = PENDING; token[1] = 0; inserts++ };
     atomic { created[0] = true; status[0] = SUPERSEDED; token[0] = 0; succ[0] = true; commits[0]++ };
     t = TASKS
  fi;
#endif
  do
  :: t < TASKS -> atomic { created[t] = true; status[t] = PENDING; token[t] = 0; inserts++;
#ifdef SUPERSEDE
       if
       :: t == 1 ->
            succ[0] = true;
            if
            :: status[0] == PENDING -> status[0] = SUPERSEDED; commits[0]++
            :: status[0] == TAKEN -> marked[0] = true
            :: else -> skip
            fi
       :: else -> skip
       fi;
#endif
       t++ }
  :: t == TASKS -> break
  od
}

/* trigger on the stream: one wake-up per batch; the record may be lost. */
active proctype StreamTrigger() {
end:
  do
  :: atomic { inserts > 0 -> inserts--;
       if
       :: drops < MAX_DROPS -> drops++      /* event dropped: nobody told */
       :: wake()
       fi }
  od
}

/* the EventBridge sweep: wakes process whenever a claimable task exists. */
active proctype Sweep() {
end:
  do
  :: atomic { any_claimable -> wake() }
  od
}

/* the shed: whoever reads an expired task's index entry first (the
   sweep's reaper, a processor's claim read) moves it to EXPIRED with one
   conditional update (expired, PENDING or TAKEN with a lapsed lease, on
   the token read), which ends its life. */
active proctype Shed() {
  byte t;
end:
  do
  :: atomic { (sheddable(0) || sheddable(1)) ->
       if
       :: sheddable(0) -> t = 0
       :: sheddable(1) -> t = 1
       fi;
       assert(expired[t] && !(status[t] == TAKEN && lease[t]));
       status[t] = EXPIRED; commits[t]++ }
  od
}

/* an operator, acting on task 0 (task 1 runs undisturbed beside it):
   redrives it once it failed or was shed (FAILURE or EXPIRED -> PENDING,
   attempts reset, a new expiry, token kept: a new life, and a nudge that
   wakes the processor), or deletes it
   unless it is TAKEN under a live lease (one conditional DeleteItem).
   Either may land between a stale claim's run and its finish. */
active proctype Operator() {
end:
  do
  :: atomic { redrives < MAX_REDRIVES && (status[0] == FAILURE || status[0] == EXPIRED) ->
       status[0] = PENDING; attempts[0] = 0; commits[0] = 0; expired[0] = false;
       marked[0] = false; succ[0] = false; redrives++; wake() }
  :: atomic { deletes < MAX_DELETES && created[0] && status[0] != DELETED && !(status[0] == TAKEN && lease[0]) ->
       status[0] = DELETED; lease[0] = false; was_deleted = true; deletes++ }
  od
}

/* time: a running lease may expire at any moment, and so may a task's
   TTL (at most MAX_EXPIRIES times in a run). */
active [TASKS] proctype Clock() {
  byte t = _pid - 5;   /* Producer, StreamTrigger, Sweep, Shed, Operator come first */
end:
  do
  :: atomic { status[t] == TAKEN && lease[t] -> lease[t] = false }
  :: atomic { expiries < MAX_EXPIRIES && created[t] && !expired[t] && !ended(t) ->
       expired[t] = true; expiries++ }
  od
}

#ifdef GROUP_LEASE
/* the group lease may expire at any moment: its holder is slow or dead. */
active proctype GroupClock() {
end:
  do
  :: atomic { gholder != NOBODY -> gholder = NOBODY }
  od
}
#define group_free (gholder == NOBODY)
#define take_group gholder = _pid; crashed = false
#define crash_holding crashed = true
#define release_group if :: !crashed && gholder == _pid -> gholder = NOBODY :: else -> skip fi
#else
#define group_free true
#define take_group skip
#define crash_holding skip
#define release_group skip
#endif

/* process: each worker takes invocations off the queue. */
active [WORKERS] proctype Process() {
  byte t, mine;
  bool claimed_any, crashed;
end:
  do
  :: atomic { wakeups > 0 && !group_free -> wakeups-- }   /* group held: Held, no tail call */
  :: atomic { wakeups > 0 && group_free ->
       wakeups--; claimed_any = false;
       take_group };   /* conditional on free or expired (one processor: a no-op) */
     /* one invocation: claim, run, finish, until nothing is claimable */
     do
     :: atomic {
          if
          :: claimable(0) || endable(0) -> t = 0
          :: claimable(1) || endable(1) -> t = 1
          fi;
          if
          :: endable(t) ->
               /* the reclaim is refused (the mark); the reader ends it
                  instead: conditional on the token and the mark */
               status[t] = SUPERSEDED; commits[t]++; mine = 255
          :: !endable(t) && status[t] == TAKEN && attempts[t] >= MAX_ATTEMPTS ->
               /* abandon: conditional on the expired lease and the token */
               status[t] = FAILURE; commits[t]++; mine = 255
          :: !endable(t) && !(status[t] == TAKEN && attempts[t] >= MAX_ATTEMPTS) ->
               /* claim / reclaim: one conditional update */
               assert(!expired[t]);   /* an expired task never starts */
               assert(!succ[t]);      /* nor one whose successor was written */
               status[t] = TAKEN; token[t]++; lease[t] = true; attempts[t]++;
               mine = token[t]
          fi;
          claimed_any = true
        };
        if
        :: mine != 255 ->
             if
             :: crashes < MAX_CRASHES -> crashes++; crash_holding; break   /* killed after claim or during run */
             :: true ->
                  /* finish: conditional on status TAKEN and our token */
                  atomic {
                    if
                    :: status[t] == TAKEN && token[t] == mine ->
                         /* the committing claim is the current one, once */
                         assert(commits[t] == 0 && mine == token[t]);
                         if
                         :: status[t] = SUCCESS
                         :: attempts[t] >= MAX_ATTEMPTS -> status[t] = FAILURE
                         :: attempts[t] < MAX_ATTEMPTS && !marked[t] -> status[t] = PENDING   /* retry after error */
                         :: marked[t] -> status[t] = SUPERSEDED   /* instead of a retry */
                         fi;
                         lease[t] = false;
                         if
                         :: status[t] != PENDING -> commits[t]++
                         :: else -> skip
                         fi
                    :: else -> skip   /* stale finish rejected: a newer claim owns it */
                    fi
                  }
             fi
        :: else -> skip
        fi
     :: atomic { !any_claimable -> break }      /* empty queue: no tail call */
     :: atomic { claimed_any && any_claimable -> /* budget spent (after claiming, as a
                                                   budget always exceeds one run): tail call */
          if
          :: drops < MAX_DROPS -> drops++       /* the tail call is lost */
          :: wake()
          fi };
        break
     od;
     /* release the group lease: conditional on still holding it (its token) */
     atomic { release_group }
  od
}

/* at most one outcome per task and life, and no resurrection, whatever
   the interleaving */
active proctype Invariant() {
end:
  do
  :: atomic { (commits[0] > 1 || commits[1] > 1) -> assert(false) }
  :: atomic { (was_deleted && status[0] != DELETED) -> assert(false) }
  od
}

ltl eventually_done { <> all_done }
