// test_eval_tasks: the task registry and the rendering of dataset rows into requests (eval/tasks.c,
// eval/dataset.c), checked against (context, continuation, gold) written by hand from the spec's rules
// (spec eval.md §2) for a few documents of every task family, in the hub's row schemas and file layouts;
// plus --tasks expansion, --limit, few-shot, and the errors for missing files and malformed rows.
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/eval/toy.h"
#include "util/common.h"

static char dir[256];

static void write_data(void) {
    // ARC-Easy: letter labels, numeric labels, non-ASCII text (choice length in code points)
    toy_write(dir, "allenai/ai2_arc/ARC-Easy/test.jsonl",
              "{\"id\":\"Q1\",\"question\":\"Which gas do plants absorb?\",\"choices\":{\"text\":[\"Oxygen\",\"Carbon "
              "dioxide\",\"Helium\"],\"label\":[\"A\",\"B\",\"C\"]},\"answerKey\":\"B\"}\n"
              "\n"
              "{\"id\":\"Q2\",\"question\":\"2+2?\",\"choices\":{\"text\":[\"3\",\"4\",\"5\",\"22\"],\"label\":[\"1\","
              "\"2\",\"3\",\"4\"]},\"answerKey\":\"2\"}\n"
              "{\"id\":\"Q3\",\"question\":\"Qu'est-ce que \\u00abcaf\\u00e9\\u00bb?\",\"choices\":{\"text\":[\"caf\\u00e9\","
              "\"th\\u00e9\"],\"label\":[\"A\",\"B\"]},\"answerKey\":\"A\"}\n");
    // ARC-Challenge in two Parquet-style shards (read in name order)
    toy_write(dir, "allenai/ai2_arc/ARC-Challenge/test-00001-of-00002.jsonl",
              "{\"question\":\"second\",\"choices\":{\"text\":[\"x\",\"y\"],\"label\":[\"A\",\"B\"]},\"answerKey\":\"B\"}\n");
    toy_write(dir, "allenai/ai2_arc/ARC-Challenge/test-00000-of-00002.jsonl",
              "{\"question\":\"first\",\"choices\":{\"text\":[\"x\",\"y\"],\"label\":[\"A\",\"B\"]},\"answerKey\":\"A\"}\n");
    toy_write(dir, "Rowan/hellaswag/data/validation-00000-of-00001.jsonl",
              "{\"ind\":24,\"activity_label\":\"Roof shingle removal\",\"ctx_a\":\"A man is sitting on a roof.\","
              "\"ctx_b\":\"HE starts pulling up roofing on a roof.\",\"ctx\":\"unused\",\"endings\":[\"is using wrap "
              "to wrap a pair of skis.\",\"[header] How to remove shingles  [title] starts pulling up roofing on a "
              "roof.\",\" starts cutting  it.\",\"holds a ladder.\"],\"source_id\":\"activitynet~v_-JhWjGDPHMY\","
              "\"split\":\"val\",\"split_type\":\"indomain\",\"label\":\"3\"}\n");
    toy_write(dir, "allenai/openbookqa/main/test.jsonl",
              "{\"id\":\"7-980\",\"question_stem\":\"The sun is responsible for\",\"choices\":{\"text\":[\"puppies "
              "learning new tricks\",\"children growing up and getting old\",\"flowers wilting in a vase\",\"plants "
              "sprouting, blooming and wilting\"],\"label\":[\"A\",\"B\",\"C\",\"D\"]},\"answerKey\":\" D\"}\n");
    toy_write(dir, "baber/piqa/validation.jsonl",
              "{\"goal\":\"To dry wet shoes\",\"sol1\":\"stuff them with newspaper\",\"sol2\":\"put them in the oven "
              "at 500F\",\"label\":0}\n"
              "{\"goal\":\"g\",\"sol1\":\"a\",\"sol2\":\"b\",\"label\":\"1\"}\n");
    toy_write(dir, "allenai/winogrande/winogrande_xl/validation.jsonl",
              "{\"sentence\":\"Sarah was a much better surgeon than Maria so _ always got the harder cases.\","
              "\"option1\":\"Sarah\",\"option2\":\"Maria\",\"answer\":\"1\"}\n"
              "{\"sentence\":\"The trophy doesn't fit in the suitcase because the _ \",\"option1\":\"trophy\","
              "\"option2\":\"suitcase\",\"answer\":\"2\"}\n");
    toy_write(dir, "EleutherAI/race/race_high_test.jsonl",
              "{\"article\":\"Tom has a dog. It is big.\",\"problems\":\"[{'answer': 'A', 'options': ['a dog', 'a "
              "cat', 'a bird', 'a fish'], 'question': 'Tom has  _  .'}, {'answer': 'C', 'options': ['small', 'old', "
              "'big', 'red'], 'question': 'What is true about the dog?'}, {'answer': 'B', 'options': ['Tom', "
              "'Mary', 'Ann', 'Bob'], 'question': 'The dog belongs to _ .'}]\",\"example_id\":\"high1.txt\"}\n");
    toy_write(dir, "cais/mmlu/abstract_algebra/test-00000-of-00001.jsonl",
              "{\"question\":\"  Find the degree of Q(sqrt(2)) over Q. \",\"subject\":\"abstract_algebra\","
              "\"choices\":[\"0\",\"4\",\"2\",\"6\"],\"answer\":2}\n");
    toy_write(dir, "cais/mmlu/abstract_algebra/dev-00000-of-00001.jsonl",
              "{\"question\":\"Is 1 odd?\",\"subject\":\"abstract_algebra\",\"choices\":[\"yes\",\"no\",\"maybe\","
              "\"both\"],\"answer\":0}\n"
              "{\"question\":\"2+3?\",\"subject\":\"abstract_algebra\",\"choices\":[\"1\",\"5\",\"2\",\"3\"],"
              "\"answer\":1}\n");
    toy_write(dir, "EleutherAI/lambada_openai/data/lambada_test.jsonl",
              "{\"text\":\"He picked up the ball and threw it to his dog Max\"}\n"
              "{\"text\":\"a  b\"}\n"
              "{\"text\":\"single\"}\n");
    toy_write(dir, "EleutherAI/wikitext_document_level/wikitext-2-raw-v1/test-00000-of-00001.jsonl",
              "{\"page\":\" = Robert Boulter = \\n Robert Boulter is an English film , television and theatre "
              "actor . \\n\"}\n");
}

static int load(EvalTask *t, const char *name, int k, double limit, int race, char *err) {
    const EvalTaskDef *d = eval_task_find(name);
    if (!d) {
        snprintf(err, ERR_LEN, "no task %s", name);
        return -1;
    }
    return eval_task_load(t, d, dir, k, limit, race, NULL, err, ERR_LEN);
}

static void check_mc(const char *task, const EvalDoc *d, const char *ctx, const char *const *conts,
                     const double *lens, int n, int gold) {
    CHECK(d->nctx == 1 && d->ncont == n && d->nchoice == n, "%s: %d choices, got nctx %d ncont %d", task, n, d->nctx,
          d->ncont);
    if (d->nctx != 1 || d->ncont != n) return;
    CHECK(!strcmp(d->ctx[0], ctx), "%s: context\n  got  \"%s\"\n  want \"%s\"", task, d->ctx[0], ctx);
    for (int i = 0; i < n; i++) {
        CHECK(!strcmp(d->cont[i], conts[i]), "%s: continuation %d: got \"%s\", want \"%s\"", task, i, d->cont[i],
              conts[i]);
        if (lens) CHECK(d->choice_len[i] == lens[i], "%s: choice %d length %g, want %g", task, i, d->choice_len[i], lens[i]);
    }
    CHECK(d->gold == gold, "%s: gold %d, want %d", task, d->gold, gold);
}

static void test_rendering(void) {
    char err[ERR_LEN];
    EvalTask t;
    if (load(&t, "arc_easy", 0, 0, 3, err) == 0) {
        CHECK(t.ndocs == 3 && t.n_original == 3, "arc_easy: 3 docs (blank line skipped), got %d", t.ndocs);
        const char *c0[] = {" Oxygen", " Carbon dioxide", " Helium"};
        const double l0[] = {6, 14, 6};
        check_mc("arc_easy[0]", &t.docs[0], "Question: Which gas do plants absorb?\nAnswer:", c0, l0, 3, 1);
        const char *c1[] = {" 3", " 4", " 5", " 22"};
        check_mc("arc_easy[1] numeric labels", &t.docs[1], "Question: 2+2?\nAnswer:", c1, NULL, 4, 1);
        const char *c2[] = {" caf\xC3\xA9", " th\xC3\xA9"};
        const double l2[] = {4, 3};
        check_mc("arc_easy[2] unicode", &t.docs[2], "Question: Qu'est-ce que \xC2\xAB" "caf\xC3\xA9\xC2\xBB?\nAnswer:",
                 c2, l2, 2, 0);
        eval_task_free(&t);
    } else CHECK(0, "arc_easy: %s", err);

    if (load(&t, "arc_challenge", 0, 0, 3, err) == 0) {
        CHECK(t.ndocs == 2 && t.rows.nfiles == 2, "arc_challenge: 2 shards");
        if (t.ndocs == 2) {
            CHECK_STR(t.docs[0].ctx[0], "Question: first\nAnswer:");
            CHECK_STR(t.docs[1].ctx[0], "Question: second\nAnswer:");
        }
        eval_task_free(&t);
    } else CHECK(0, "arc_challenge: %s", err);

    if (load(&t, "hellaswag", 0, 0, 3, err) == 0) {
        // ctx_b capitalized (rest lowercased), clean(): " [title]" -> ". ", [..] removed, "  " -> " "
        const char *c[] = {" is using wrap to wrap a pair of skis.",
                           "  How to remove shingles . starts pulling up roofing on a roof.", " starts cutting it.",
                           " holds a ladder."};
        const double l[] = {37, 62, 18, 15};
        check_mc("hellaswag", &t.docs[0],
                 "Roof shingle removal: A man is sitting on a roof. He starts pulling up roofing on a roof.", c, l, 4, 3);
        eval_task_free(&t);
    } else CHECK(0, "hellaswag: %s", err);

    if (load(&t, "openbookqa", 0, 0, 3, err) == 0) {
        const char *c[] = {" puppies learning new tricks", " children growing up and getting old",
                           " flowers wilting in a vase", " plants sprouting, blooming and wilting"};
        check_mc("openbookqa (answerKey ' D' lstripped)", &t.docs[0], "The sun is responsible for", c, NULL, 4, 3);
        eval_task_free(&t);
    } else CHECK(0, "openbookqa: %s", err);

    if (load(&t, "piqa", 0, 0, 3, err) == 0) {
        const char *c[] = {" stuff them with newspaper", " put them in the oven at 500F"};
        check_mc("piqa", &t.docs[0], "Question: To dry wet shoes\nAnswer:", c, NULL, 2, 0);
        CHECK(t.ndocs == 2 && t.docs[1].gold == 1, "piqa: label given as \"1\" reads as 1");
        eval_task_free(&t);
    } else CHECK(0, "piqa: %s", err);

    if (load(&t, "winogrande", 0, 0, 3, err) == 0) {
        const EvalDoc *d = &t.docs[0];
        CHECK(d->nctx == 2 && d->ncont == 1 && d->nchoice == 2, "winogrande: two contexts, one continuation");
        if (d->nctx == 2) {
            CHECK_STR(d->ctx[0], "Sarah was a much better surgeon than Maria so Sarah");
            CHECK_STR(d->ctx[1], "Sarah was a much better surgeon than Maria so Maria");
            CHECK_STR(d->cont[0], " always got the harder cases.");
            CHECK(d->gold == 0, "winogrande: answer \"1\" -> 0");
        }
        d = &t.docs[1]; // blank at the end: the continuation is " " + "" (stripped suffix)
        if (d->nctx == 2) {
            CHECK_STR(d->ctx[1], "The trophy doesn't fit in the suitcase because the suitcase");
            CHECK_STR(d->cont[0], " ");
            CHECK(d->gold == 1, "winogrande: answer \"2\" -> 1");
        }
        eval_task_free(&t);
    } else CHECK(0, "winogrande: %s", err);

    const char *race_c[] = {" Tom", " Mary", " Ann", " Bob"};
    if (load(&t, "race", 0, 0, 3, err) == 0) {
        check_mc("race v3", &t.docs[0],
                 "Article: Tom has a dog. It is big.\n\nTom has a dog\nQuestion: What is true about the dog?\n"
                 "Answer: big\nThe dog belongs to _ .",
                 race_c, NULL, 4, 1);
        eval_task_free(&t);
    } else CHECK(0, "race: %s", err);
    if (load(&t, "race", 0, 0, 2, err) == 0) {
        check_mc("race v2 (cloze stem dropped)", &t.docs[0],
                 "Article: Tom has a dog. It is big.\n\n _  .a dog\nQuestion: What is true about the dog?\n"
                 "Answer: big\nThe dog belongs to _ .",
                 race_c, NULL, 4, 1);
        eval_task_free(&t);
    } else CHECK(0, "race v2: %s", err);

    const char *abcd[] = {" A", " B", " C", " D"};
    const double ones[] = {1, 1, 1, 1};
    if (load(&t, "mmlu_abstract_algebra", 0, 0, 3, err) == 0) {
        check_mc("mmlu 0-shot", &t.docs[0],
                 "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
                 "Find the degree of Q(sqrt(2)) over Q.\nA. 0\nB. 4\nC. 2\nD. 6\nAnswer:",
                 abcd, ones, 4, 2);
        eval_task_free(&t);
    } else CHECK(0, "mmlu: %s", err);
    if (load(&t, "mmlu_abstract_algebra", 2, 0, 3, err) == 0) {
        check_mc("mmlu 2-shot", &t.docs[0],
                 "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
                 "Is 1 odd?\nA. yes\nB. no\nC. maybe\nD. both\nAnswer: A\n\n"
                 "2+3?\nA. 1\nB. 5\nC. 2\nD. 3\nAnswer: B\n\n"
                 "Find the degree of Q(sqrt(2)) over Q.\nA. 0\nB. 4\nC. 2\nD. 6\nAnswer:",
                 abcd, ones, 4, 2);
        eval_task_free(&t);
    } else CHECK(0, "mmlu 2-shot: %s", err);
    CHECK(load(&t, "mmlu_abstract_algebra", 3, 0, 3, err) < 0 && strstr(err, "only 2 rows"),
          "mmlu 3-shot with 2 dev rows fails: %s", err);
    eval_task_free(&t);

    if (load(&t, "lambada_openai", 0, 0, 3, err) == 0) {
        CHECK(t.ndocs == 3, "lambada: 3 docs");
        if (t.ndocs == 3) {
            CHECK_STR(t.docs[0].ctx[0], "He picked up the ball and threw it to his dog");
            CHECK_STR(t.docs[0].cont[0], " Max");
            CHECK_STR(t.docs[1].ctx[0], "a "); // "a  b".split(" ") = ["a", "", "b"]
            CHECK_STR(t.docs[1].cont[0], " b");
            CHECK_STR(t.docs[2].ctx[0], ""); // no space: empty context (the prefix token conditions)
            CHECK_STR(t.docs[2].cont[0], " single");
        }
        eval_task_free(&t);
    } else CHECK(0, "lambada: %s", err);

    if (load(&t, "wikitext", 0, 0, 3, err) == 0) {
        const EvalDoc *d = &t.docs[0];
        CHECK_STR(d->text, " = Robert Boulter =\nRobert Boulter is an English film, television and theatre actor.\n");
        CHECK(d->words == 18, "wikitext words 18, got %ld", d->words);
        CHECK(d->bytes == 90, "wikitext bytes 90, got %ld", d->bytes);
        eval_task_free(&t);
    } else CHECK(0, "wikitext: %s", err);

    if (load(&t, "arc_easy", 0, 0.5, 3, err) == 0) {
        CHECK(t.ndocs == 2 && t.n_original == 3, "--limit 0.5 of 3 docs = ceil(1.5) = 2, got %d", t.ndocs);
        eval_task_free(&t);
    }
    if (load(&t, "arc_easy", 0, 1, 3, err) == 0) {
        CHECK(t.ndocs == 1, "--limit 1");
        eval_task_free(&t);
    }
}

static void test_expand(void) {
    char err[ERR_LEN];
    const EvalTaskDef **d;
    unsigned groups;
    int n = eval_tasks_expand("mmlu", &d, &groups, err, sizeof err);
    CHECK(n == 57 && groups == 0x1F, "mmlu = 57 leaves + all groups, got %d, 0x%x", n, groups);
    int per[4] = {0};
    for (int i = 0; i < n; i++)
        for (int g = 0; g < 4; g++) per[g] += !strcmp(d[i]->group, eval_mmlu_groups[g]);
    CHECK(per[0] == 19 && per[1] == 13 && per[2] == 12 && per[3] == 13,
          "subgroup sizes stem 19, other 13, social sciences 12, humanities 13: got %d %d %d %d", per[0], per[1],
          per[2], per[3]);
    free(d);
    n = eval_tasks_expand(" arc_easy, mmlu_humanities ,arc_easy,mmlu_formal_logic", &d, &groups, err, sizeof err);
    CHECK(n == 14 && groups == 0x8 && d[0] == eval_task_find("arc_easy"), "list with duplicates: got %d 0x%x", n,
          groups);
    free(d);
    CHECK(eval_tasks_expand("arc_easy,boolq", &d, &groups, err, sizeof err) < 0 && strstr(err, "unknown task 'boolq'") &&
              strstr(err, "lambada_openai"),
          "unknown task names the known ones: %s", err);
    CHECK(eval_tasks_expand(" , ", &d, &groups, err, sizeof err) < 0, "empty list is an error");
    const EvalTaskDef *x = eval_task_find("mmlu_college_medicine");
    CHECK(x && !strcmp(x->group, "mmlu_other") && !strcmp(x->alias, "college_medicine"), "college_medicine is other");
    x = eval_task_find("mmlu_econometrics");
    CHECK(x && !strcmp(x->group, "mmlu_social_sciences"), "econometrics is social sciences");
    CHECK(eval_task_count() == 9 + 57, "registry has 66 leaf tasks");
}

static void test_errors(void) {
    char err[ERR_LEN];
    EvalTask t;
    char empty[300];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    mkdir_p(empty);
    CHECK(eval_task_load(&t, eval_task_find("arc_easy"), empty, 0, 0, 3, NULL, err, sizeof err) < 0 &&
              strstr(err, "arc_easy: no test split found under") &&
              strstr(err, "allenai/ai2_arc/ARC-Easy/{test-*.parquet,test-*.jsonl,test.jsonl,") &&
              strstr(err, "the HF dataset allenai/ai2_arc, config ARC-Easy"),
          "missing files: %s", err);
    eval_task_free(&t);
    CHECK(eval_task_load(&t, eval_task_find("race"), empty, 0, 0, 3, NULL, err, sizeof err) < 0 &&
              strstr(err, "race_high_test.jsonl"),
          "missing race lists the extra path: %s", err);
    eval_task_free(&t);

    char bad[300];
    snprintf(bad, sizeof bad, "%s/bad", dir);
    struct {
        const char *task, *rel, *text, *want1, *want2;
    } cases[] = {
        {"arc_easy", "allenai/ai2_arc/ARC-Easy/test.jsonl",
         "{\"question\":\"q\",\"choices\":{\"text\":[\"a\"],\"label\":[\"A\"]},\"answerKey\":\"A\"}\n{\"question\": oops}\n",
         "test.jsonl:2: invalid JSON", NULL},
        {"arc_easy", "allenai/ai2_arc/ARC-Easy/test.jsonl",
         "{\"question\":\"q\",\"choices\":{\"text\":[\"a\"],\"label\":[\"A\"]},\"answerKey\":1}\n",
         "test.jsonl:1: field 'answerKey': expected a string, got a number", NULL},
        {"arc_easy", "allenai/ai2_arc/ARC-Easy/test.jsonl",
         "{\"question\":\"q\",\"choices\":{\"text\":[\"a\",\"b\"],\"label\":[\"A\",\"B\"]},\"answerKey\":\"E\"}\n",
         "test.jsonl:1: field 'answerKey': \"E\" is not one of choices.label", NULL},
        {"arc_easy", "allenai/ai2_arc/ARC-Easy/test.jsonl",
         "{\"question\":\"q\",\"choices\":{\"text\":[\"a\",2],\"label\":[\"A\",\"B\"]},\"answerKey\":\"A\"}\n",
         "field 'choices.text': element 1: expected a string, got a number", NULL},
        {"arc_easy", "allenai/ai2_arc/ARC-Easy/test.jsonl", "[1, 2]\n", "test.jsonl: row 1: expected a JSON object",
         NULL},
        {"hellaswag", "Rowan/hellaswag/validation.jsonl",
         "{\"activity_label\":\"a\",\"ctx_a\":\"b\",\"ctx_b\":\"c\",\"endings\":[\"x\"],\"label\":\"\"}\n",
         "validation.jsonl:1: field 'label': expected an integer", NULL},
        {"winogrande", "allenai/winogrande/winogrande_xl/validation.jsonl",
         "{\"sentence\":\"no blank\",\"option1\":\"a\",\"option2\":\"b\",\"answer\":\"1\"}\n",
         "validation.jsonl:1: field 'sentence': no '_' blank", NULL},
        {"winogrande", "allenai/winogrande/winogrande_xl/validation.jsonl",
         "{\"sentence\":\"a _ b\",\"option1\":\"a\",\"option2\":\"b\",\"answer\":\"3\"}\n",
         "field 'answer': expected \"1\" or \"2\", got \"3\"", NULL},
        {"race", "EleutherAI/race/high/test.jsonl", "{\"article\":\"x\",\"problems\":\"[{'answer': 'A',\"}\n",
         "test.jsonl:1: field 'problems': not a Python literal list", NULL},
        {"race", "EleutherAI/race/high/test.jsonl",
         "{\"article\":\"x\",\"problems\":\"[{'answer': 'E', 'options': ['a','b','c','d'], 'question': 'q'}]\"}\n",
         "problems[0]: answer \"E\" is not a letter A-D", NULL},
        {"mmlu_anatomy", "cais/mmlu/anatomy/test-00000-of-00001.jsonl",
         "{\"question\":\"q\",\"choices\":[\"a\",\"b\",\"c\"],\"answer\":0}\n", "field 'choices': expected 4 strings, got 3",
         NULL},
        {"arc_easy", "allenai/ai2_arc/ARC-Easy/test-00000-of-00001.parquet", "PAR1",
         "Parquet is not supported by this build", "to_json('"},
        {"wikitext", "EleutherAI/wikitext_document_level/wikitext-2-raw-v1/test.jsonl", "{\"text\":\"wrong column\"}\n",
         "test.jsonl:1: field 'page' is missing (expected a string)", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sub[400];
        snprintf(sub, sizeof sub, "%s/%zu", bad, i);
        toy_write(sub, cases[i].rel, cases[i].text);
        int rc = eval_task_load(&t, eval_task_find(cases[i].task), sub, 0, 0, 3, NULL, err, sizeof err);
        CHECK(rc < 0 && strstr(err, cases[i].want1) && (!cases[i].want2 || strstr(err, cases[i].want2)),
              "bad input %zu (%s): want \"%s\", got \"%s\"", i, cases[i].task, cases[i].want1, rc < 0 ? err : "(no error)");
        eval_task_free(&t);
    }
    CHECK(eval_task_load(&t, eval_task_find("arc_easy"), dir, 5, 0, 3, NULL, err, sizeof err) < 0 &&
              strstr(err, "supported for mmlu only"),
          "few-shot refused outside mmlu: %s", err);
    eval_task_free(&t);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_eval_tasks.XXXXXX");
    if (!mkdtemp(dir)) die("mkdtemp failed");
    write_data();
    test_rendering();
    test_expand();
    test_errors();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    if (toy_failures) {
        fprintf(stderr, "test_eval_tasks: %d checks FAILED\n", toy_failures);
        return 1;
    }
    printf("PASS test_eval_tasks: rendering of arc_easy/arc_challenge (shards), hellaswag, openbookqa, piqa, "
           "winogrande, race v2/v3, mmlu 0/2-shot, lambada, wikitext; --tasks expansion, --limit, 14 error cases\n");
    return 0;
}
