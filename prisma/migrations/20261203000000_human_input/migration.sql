-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "humanInputToken" TEXT;

-- AlterTable
ALTER TABLE "Review" ADD COLUMN     "resumeTaskId" TEXT;


-- AlterTable
ALTER TABLE "Review" ADD COLUMN     "shownState" TEXT;

-- Messages posted before this column existed show their state already.
UPDATE "Review" SET "shownState" = CASE WHEN state = 'deciding' THEN 'pending' ELSE state END WHERE "messageTs" IS NOT NULL;
