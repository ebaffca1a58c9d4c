/* Issue 27: what mfc_stream_open admits, blob by blob. Reads a list of cases, one a line:
 *
 *   BLOB FLAGS STATUS [VERDICT]
 *
 * FLAGS is `default` (options NULL-equivalent: verify, refuse what cannot be verified) or MFC_OPEN_*
 * flag names without the prefix joined by `+` (ALLOW_UNVERIFIED, ALLOW_UNVERIFIED_UNBOUNDED_HORIZON,
 * SKIP_VERIFICATION); STATUS the MfcStatus mfc_stream_open must return (a name without the
 * MFC_STATUS_ prefix, e.g. OK, UNVERIFIABLE, SENSITIVITY_UNDERSTATED); VERDICT, when it opens, the
 * MfcVerdict mfc_stream_verdict must then say (without MFC_VERDICT_, e.g. VERIFIED,
 * UNVERIFIED_SCHEMA). Blank lines and lines starting with '#' are skipped.
 *
 * Every case opens with the scratch the blob needs (mfc_verify_scratch_len) and the default budget,
 * so the outcome is the blob's, not the caller's memory; a stream that opens takes one step. Prints
 * one line a case and exits 0 when every case holds, 1 otherwise, 2 on a bad list.
 *
 *   admit LIST
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfc.h"

#define DIM 2

static const char *status_name(MfcStatus s) {
    switch (s) {
    case MFC_STATUS_OK: return "OK";
    case MFC_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case MFC_STATUS_INVALID_BLOB: return "INVALID_BLOB";
    case MFC_STATUS_UNSUPPORTED_DECODER: return "UNSUPPORTED_DECODER";
    case MFC_STATUS_DIMENSION_MISMATCH: return "DIMENSION_MISMATCH";
    case MFC_STATUS_NON_FINITE_INPUT: return "NON_FINITE_INPUT";
    case MFC_STATUS_STREAM_FINISHED: return "STREAM_FINISHED";
    case MFC_STATUS_WORKSPACE_TOO_SMALL: return "WORKSPACE_TOO_SMALL";
    case MFC_STATUS_NOT_CALIBRATED: return "NOT_CALIBRATED";
    case MFC_STATUS_WEAK_SEED: return "WEAK_SEED";
    case MFC_STATUS_REFUSED: return "REFUSED";
    case MFC_STATUS_OVERLAP: return "OVERLAP";
    case MFC_STATUS_STALE_CHECKPOINT: return "STALE_CHECKPOINT";
    case MFC_STATUS_CHECKPOINT_MISMATCH: return "CHECKPOINT_MISMATCH";
    case MFC_STATUS_MALFORMED_CHECKPOINT: return "MALFORMED_CHECKPOINT";
    case MFC_STATUS_BUFFER_TOO_SMALL: return "BUFFER_TOO_SMALL";
    case MFC_STATUS_STREAM_ALREADY_STARTED: return "STREAM_ALREADY_STARTED";
    case MFC_STATUS_SENSITIVITY_UNDERSTATED: return "SENSITIVITY_UNDERSTATED";
    case MFC_STATUS_UNVERIFIABLE: return "UNVERIFIABLE";
    case MFC_STATUS_STREAM_CLOSED: return "STREAM_CLOSED";
    case MFC_STATUS_RESTORE_REQUIRED: return "RESTORE_REQUIRED";
    case MFC_STATUS_VERIFY_SCRATCH_TOO_SMALL: return "VERIFY_SCRATCH_TOO_SMALL";
    case MFC_STATUS_VERIFY_OVER_BUDGET: return "VERIFY_OVER_BUDGET";
    case MFC_STATUS_NON_FINITE_RELEASE: return "NON_FINITE_RELEASE";
    }
    return "?";
}

static const char *verdict_name(MfcVerdict v) {
    switch (v) {
    case MFC_VERDICT_VERIFIED: return "VERIFIED";
    case MFC_VERDICT_SKIPPED: return "SKIPPED";
    case MFC_VERDICT_UNVERIFIED: return "UNVERIFIED";
    case MFC_VERDICT_UNVERIFIED_FORM: return "UNVERIFIED_FORM";
    case MFC_VERDICT_UNVERIFIED_SCHEMA: return "UNVERIFIED_SCHEMA";
    case MFC_VERDICT_UNVERIFIED_WORKLOAD_NOT_STORED: return "UNVERIFIED_WORKLOAD_NOT_STORED";
    case MFC_VERDICT_UNVERIFIED_OVER_BUDGET: return "UNVERIFIED_OVER_BUDGET";
    case MFC_VERDICT_UNVERIFIED_SCRATCH_TOO_SMALL: return "UNVERIFIED_SCRATCH_TOO_SMALL";
    case MFC_VERDICT_UNVERIFIED_ILL_CONDITIONED: return "UNVERIFIED_ILL_CONDITIONED";
    case MFC_VERDICT_NO_STREAM: return "NO_STREAM";
    }
    return "?";
}

/* The flags named in `text` (`default`, or names joined by '+'); -1 for an unknown name. */
static long parse_flags(const char *text) {
    if (strcmp(text, "default") == 0) return 0;
    static const struct {
        const char *name;
        uint32_t flag;
    } known[] = {
        {"ALLOW_UNVERIFIED", MFC_OPEN_ALLOW_UNVERIFIED},
        {"ALLOW_UNVERIFIED_UNBOUNDED_HORIZON", MFC_OPEN_ALLOW_UNVERIFIED_UNBOUNDED_HORIZON},
        {"SKIP_VERIFICATION", MFC_OPEN_SKIP_VERIFICATION},
    };
    long flags = 0;
    while (*text) {
        size_t len = strcspn(text, "+");
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] &&
               !(strlen(known[i].name) == len && strncmp(known[i].name, text, len) == 0)) {
            i++;
        }
        if (i == sizeof known / sizeof known[0]) return -1;
        flags |= (long)known[i].flag;
        text += len + (text[len] == '+');
    }
    return flags;
}

static uint8_t blob[1 << 20];

/* Opens `path` with `flags`; returns the status, and the verdict through `verdict`. */
static MfcStatus admit(const char *path, uint32_t flags, MfcVerdict *verdict) {
    *verdict = MFC_VERDICT_NO_STREAM;
    FILE *f = fopen(path, "rb");
    if (!f) return MFC_STATUS_INVALID_ARGUMENT;
    size_t len = fread(blob, 1, sizeof blob, f);
    fclose(f);
    size_t floats = 0, doubles = 0;
    MfcStatus s = mfc_workspace_len(blob, len, DIM, &floats);
    if (s == MFC_STATUS_OK) s = mfc_verify_scratch_len(blob, len, &doubles);
    if (s != MFC_STATUS_OK) return s;
    static MfcStreamStorage storage;
    static const uint8_t seed[32] = "admit.c seed, demo only........";
    float *workspace = calloc(floats, sizeof(float));
    double *scratch = calloc(doubles + 1, sizeof(double));
    MfcOpenOptions options = {0};
    options.flags = flags;
    options.scratch = scratch;
    options.scratch_len = doubles;
    MfcStream *stream = NULL;
    s = mfc_stream_open(&storage, blob, len, DIM, workspace, floats, seed, &options, &stream);
    if (s == MFC_STATUS_OK) {
        *verdict = mfc_stream_verdict(stream);
        float x[DIM] = {0.5f, -0.25f}, y[DIM];
        MfcStatus step = mfc_stream_step(stream, x, y, DIM);
        MfcStatus close = mfc_stream_close(stream);
        if (step != MFC_STATUS_OK) s = step;
        if (close != MFC_STATUS_OK) s = close;
    }
    free(scratch);
    free(workspace);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: admit LIST\n");
        return 2;
    }
    FILE *list = fopen(argv[1], "r");
    if (!list) {
        perror(argv[1]);
        return 2;
    }
    char line[4096];
    int cases = 0, failed = 0;
    while (fgets(line, sizeof line, list)) {
        char path[2048], flags_text[256], want_status[64], want_verdict[64] = "";
        if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line)) continue;
        int fields = sscanf(line, "%2047s %255s %63s %63s", path, flags_text, want_status,
                            want_verdict);
        long flags = fields >= 3 ? parse_flags(flags_text) : -1;
        if (flags < 0) {
            fprintf(stderr, "admit: bad line: %s", line);
            return 2;
        }
        MfcVerdict verdict;
        MfcStatus status = admit(path, (uint32_t)flags, &verdict);
        int ok = strcmp(status_name(status), want_status) == 0 &&
                 (fields < 4 || strcmp(verdict_name(verdict), want_verdict) == 0);
        printf("%s %s %s: %s%s%s (expected %s%s%s)\n", ok ? "ok  " : "FAIL", path, flags_text,
               status_name(status), status == MFC_STATUS_OK ? ", verdict " : "",
               status == MFC_STATUS_OK ? verdict_name(verdict) : "", want_status,
               fields >= 4 ? ", verdict " : "", fields >= 4 ? want_verdict : "");
        cases++;
        failed += !ok;
    }
    fclose(list);
    printf("admit: %d passed, %d failed\n", cases - failed, failed);
    return cases > 0 && failed == 0 ? 0 : 1;
}
