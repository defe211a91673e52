/*
 * The LIFO queue's protocol: create -> stream -> trigger -> process,
 * leases with fencing tokens, attempts, the safety sweep and tail calls.
 *
 * Checked (model/check):
 *   safety    at most one outcome is committed per task, and only by the
 *             claim that holds the task's current token (assertions);
 *   liveness  every task eventually ends SUCCESS or FAILURE, although
 *             stream events and tail calls may be lost and workers may
 *             crash at any point (LTL <> all_done, weak fairness).
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
#define MAX_CRASHES  2
#define MAX_DROPS    2
#define MAX_WAKEUPS  2

mtype = { PENDING, TAKEN, SUCCESS, FAILURE };

mtype status[TASKS];
byte  token[TASKS];      /* fencing token, +1 per claim */
bool  lease[TASKS];      /* lease still running */
byte  attempts[TASKS];
byte  commits[TASKS];    /* outcomes committed */
bool  created[TASKS];

byte wakeups = 0;        /* Lambda's queue of async invocations of process */
byte crashes = 0;
byte drops = 0;
byte inserts = 0;        /* stream records not yet seen by trigger */

#define claimable(t) (created[t] && (status[t] == PENDING || (status[t] == TAKEN && !lease[t])))
#define any_claimable (claimable(0) || claimable(1))
#define all_done ((status[0] == SUCCESS || status[0] == FAILURE) && (status[1] == SUCCESS || status[1] == FAILURE))

inline wake() {
  if
  :: wakeups < MAX_WAKEUPS -> wakeups++
  :: else -> skip            /* already queued: another wake-up adds nothing */
  fi
}

/* create: writes PENDING tasks (claimable), one stream record each. */
active proctype Producer() {
  byte t = 0;
  do
  :: t < TASKS -> atomic { created[t] = true; status[t] = PENDING; token[t] = 0; inserts++; t++ }
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

/* time: a running lease may expire at any moment. */
active [TASKS] proctype Clock() {
  byte t = _pid - 3;   /* Producer, StreamTrigger, Sweep come first */
end:
  do
  :: atomic { status[t] == TAKEN && lease[t] -> lease[t] = false }
  od
}

/* process: each worker takes invocations off the queue. */
active [WORKERS] proctype Process() {
  byte t, mine;
  bool claimed_any;
end:
  do
  :: atomic { wakeups > 0 -> wakeups--; claimed_any = false };
     /* one invocation: claim, run, finish, until nothing is claimable */
     do
     :: atomic {
          if
          :: claimable(0) -> t = 0
          :: claimable(1) -> t = 1
          fi;
          if
          :: status[t] == TAKEN && attempts[t] >= MAX_ATTEMPTS ->
               /* abandon: conditional on the expired lease and the token */
               status[t] = FAILURE; commits[t]++; mine = 255
          :: else ->
               /* claim / reclaim: one conditional update */
               status[t] = TAKEN; token[t]++; lease[t] = true; attempts[t]++;
               mine = token[t]
          fi;
          claimed_any = true
        };
        if
        :: mine != 255 ->
             if
             :: crashes < MAX_CRASHES -> crashes++; break   /* killed after claim or during run */
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
                         :: attempts[t] < MAX_ATTEMPTS -> status[t] = PENDING   /* retry after error */
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
     od
  od
}

/* at most one outcome per task, whatever the interleaving */
active proctype Invariant() {
end:
  do
  :: atomic { (commits[0] > 1 || commits[1] > 1) -> assert(false) }
  od
}

ltl eventually_done { <> all_done }
