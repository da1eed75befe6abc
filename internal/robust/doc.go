// Package robust checks histories of limiter calls recorded under faults
// (the robustness suite, tests/robustness_test.go), as etcd's robustness
// tests check theirs: each call with its invoke and return instants and
// its outcome, partitioned by key, checked for linearizability against a
// sequential model of the limiter with porcupine.
//
// The model is a budget: a key whose limit cannot refill within a run (a
// GCRA key of burst B and one token a day, a fixed window of a day, a
// quota of a month) admits exactly B+1 units, then refuses. Against it a
// history shows every way a limiter can be wrong that a user can see:
//
//   - an admission past the limit (no linearization has budget left);
//   - a refusal while budget was left (a charge lost, or one taken that no
//     caller was told of);
//   - a charge no answer accounts for: the final read of the key finds
//     more spent than the admissions and the "unknown" answers allow (a
//     TRYAGAIN or CLUSTERDOWN that was applied after all);
//   - a charge lost: the final read finds less spent than the admissions.
//
// An answer that says nothing of the outcome (the connection dropped, the
// call timed out, "the outcome is unknown") may or may not have charged:
// the model takes both branches. An answer that says nothing was applied
// (TRYAGAIN, CLUSTERDOWN, MOVED, LOADING) charges nothing.
package robust
